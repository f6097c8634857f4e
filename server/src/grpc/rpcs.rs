//! The one table of the RPCs this server answers: their names (static, for spans and metric
//! labels, so a caller probing random paths cannot grow the series), their kind (how the
//! hygiene layer treats their request body) and their class (which token they need, whether
//! admission counts them). The observe layer looks a request's RPC up once ([`Called`]);
//! auth, hygiene and admission read what it found. A test keeps the table equal to the
//! services' descriptors.

/// How an RPC's messages flow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// One request message, one answer: the request is received whole before admission.
    Unary,
    /// One request message, a stream of answers.
    ServerStream,
    /// Streams both ways (reflection).
    BidiStream,
}

/// What an RPC is, for access and admission.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    /// Records events: `RANKING_WRITE_TOKEN`.
    Write,
    /// Changes the catalog: `RANKING_WRITE_TOKEN`, or `RANKING_ADMIN_TOKEN`.
    Catalog,
    /// Recompute: `RANKING_ADMIN_TOKEN`.
    Admin,
    /// Reads rankings: `RANKING_READ_TOKEN`, or `RANKING_ADMIN_TOKEN`.
    Read,
    /// Health: always open, and never refused by admission (a flood must not make a busy
    /// server look dead to its orchestrator).
    Health,
    /// Server reflection: always open.
    Reflection,
    /// GetAccess: always open (it says what the caller's own token opens), admitted like a read.
    Access,
}

/// One RPC of the table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rpc {
    /// The full service name, `ranking.v1.RankingService`.
    pub service: &'static str,
    /// The method, `GetTopN`.
    pub method: &'static str,
    /// How its messages flow.
    pub kind: Kind,
    /// What it is.
    pub class: Class,
}

impl Rpc {
    /// Whether its request is one message (unary and server-streaming RPCs), received whole
    /// before the call may take a slot.
    pub fn one_message(&self) -> bool {
        self.kind != Kind::BidiStream
    }

    /// Whether it is a stream anyone may open without a token (health Watch, reflection):
    /// such streams are held to a small share of the server ([`super::layers::admission`]).
    pub fn public_stream(&self) -> bool {
        self.kind != Kind::Unary && matches!(self.class, Class::Health | Class::Reflection)
    }
}

/// The ranking service's name.
pub const RANKING: &str = "ranking.v1.RankingService";
const HEALTH: &str = "grpc.health.v1.Health";
const REFLECTION_V1: &str = "grpc.reflection.v1.ServerReflection";
const REFLECTION_V1ALPHA: &str = "grpc.reflection.v1alpha.ServerReflection";

const fn rpc(service: &'static str, method: &'static str, kind: Kind, class: Class) -> Rpc {
    Rpc { service, method, kind, class }
}

/// Every RPC this server answers.
pub const RPCS: &[Rpc] = &[
    rpc(RANKING, "RecordEvent", Kind::Unary, Class::Write),
    rpc(RANKING, "RecordEvents", Kind::Unary, Class::Write),
    rpc(RANKING, "UpdateCatalog", Kind::Unary, Class::Catalog),
    rpc(RANKING, "Recompute", Kind::Unary, Class::Admin),
    rpc(RANKING, "GetTopN", Kind::Unary, Class::Read),
    rpc(RANKING, "GetRank", Kind::Unary, Class::Read),
    rpc(RANKING, "GetRanks", Kind::Unary, Class::Read),
    rpc(RANKING, "ListMovers", Kind::Unary, Class::Read),
    rpc(RANKING, "ExplainRank", Kind::Unary, Class::Read),
    rpc(RANKING, "WatchTopN", Kind::ServerStream, Class::Read),
    rpc(RANKING, "GetAccess", Kind::Unary, Class::Access),
    rpc(RANKING, "PutControl", Kind::Unary, Class::Admin),
    rpc(RANKING, "DeleteControl", Kind::Unary, Class::Admin),
    rpc(RANKING, "ListControls", Kind::Unary, Class::Read),
    rpc(RANKING, "PreviewTopN", Kind::Unary, Class::Read),
    rpc(RANKING, "GetCatalog", Kind::Unary, Class::Read),
    rpc(RANKING, "GetRankHistory", Kind::Unary, Class::Read),
    rpc(RANKING, "CompareRankings", Kind::Unary, Class::Read),
    rpc(RANKING, "GetStatus", Kind::Unary, Class::Admin),
    rpc(HEALTH, "Check", Kind::Unary, Class::Health),
    rpc(HEALTH, "Watch", Kind::ServerStream, Class::Health),
    rpc(REFLECTION_V1, "ServerReflectionInfo", Kind::BidiStream, Class::Reflection),
    rpc(REFLECTION_V1ALPHA, "ServerReflectionInfo", Kind::BidiStream, Class::Reflection),
];

/// The RPC of a request path `/package.Service/Method`, `None` for any other path.
pub fn of(path: &str) -> Option<&'static Rpc> {
    let (service, method) = path.strip_prefix('/')?.split_once('/')?;
    RPCS.iter().find(|r| r.service == service && r.method == method)
}

/// The RPC a request calls, looked up once by the outermost gRPC layer and left in the
/// request's extensions for the layers inside it (`None`: no RPC of this server).
#[derive(Debug, Clone, Copy)]
pub struct Called(pub Option<&'static Rpc>);

/// The RPC of a request: the one the outermost layer found, else looked up now.
pub fn called<B>(request: &tonic::codegen::http::Request<B>) -> Option<&'static Rpc> {
    match request.extensions().get::<Called>() {
        Some(Called(rpc)) => *rpc,
        None => of(request.uri().path()),
    }
}

#[cfg(test)]
mod tests {
    use prost::Message;

    use super::*;

    #[test]
    fn the_table_is_every_method_of_the_served_descriptors_with_its_kind() {
        let sets = [
            ranking_proto::FILE_DESCRIPTOR_SET,
            tonic_health::pb::FILE_DESCRIPTOR_SET,
            tonic_reflection::pb::v1::FILE_DESCRIPTOR_SET,
            tonic_reflection::pb::v1alpha::FILE_DESCRIPTOR_SET,
        ];
        let mut described = Vec::new();
        for set in sets {
            let set = prost_types::FileDescriptorSet::decode(set).expect("descriptor set");
            for file in &set.file {
                for service in &file.service {
                    let full = format!("{}.{}", file.package(), service.name());
                    for method in &service.method {
                        let kind = match (method.client_streaming(), method.server_streaming()) {
                            (false, false) => Kind::Unary,
                            (false, true) => Kind::ServerStream,
                            _ => Kind::BidiStream,
                        };
                        let path = format!("/{full}/{}", method.name());
                        let found = of(&path).unwrap_or_else(|| panic!("{path} is not in the table"));
                        assert_eq!(found.kind, kind, "{path}");
                        described.push(path);
                    }
                }
            }
        }
        described.sort();
        described.dedup();
        assert_eq!(described.len(), RPCS.len(), "the table names an RPC no descriptor has: {described:?}");
    }

    #[test]
    fn only_the_tables_paths_are_rpcs() {
        // Every other path is named `unknown` by the layers (`layers::standard::labels`).
        for path in ["/ranking.v1.RankingService/Nope", "/x.Y/GetTopN", "garbage", "/grpc.health.v1.Health/Check/x"] {
            assert_eq!(of(path), None, "{path}");
        }
        let check = of("/grpc.health.v1.Health/Check").expect("health");
        assert_eq!((check.service, check.method, check.class), ("grpc.health.v1.Health", "Check", Class::Health));
    }
}
