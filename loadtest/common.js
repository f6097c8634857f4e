// Shared helpers of the k6 scenarios: connection by server reflection (no proto files) and
// event builders. ENDPOINT (host:port) selects the server; default 127.0.0.1:50051.
import grpc from 'k6/net/grpc';

export const endpoint = __ENV.ENDPOINT || '127.0.0.1:50051';
export const service = 'ranking.v1.RankingService';

export function connect(client) {
  client.connect(endpoint, { plaintext: true, reflect: true, timeout: '10s' });
}

export function nowIso() {
  return new Date().toISOString();
}

export function event(id, productId, type, amount) {
  return { event_id: id, product_id: productId, type: type, amount: amount || 0, occurred_at: nowIso() };
}

export function invoke(client, method, request) {
  return client.invoke(`${service}/${method}`, request);
}

export const OK = grpc.StatusOK;
