// The service, as the console calls it: one gRPC-Web client of the API on this very origin,
// carrying the token its user gave (kept for the browser tab only).

import { Code, ConnectError, createClient, type Client, type Interceptor } from "@connectrpc/connect";
import { createGrpcWebTransport } from "@connectrpc/connect-web";
import { RankingService } from "./gen/ranking/v1/ranking_pb";

const TOKEN_KEY = "ranking-console-token";

/** The bearer token of this tab, or "" when none was given. */
export function token(): string {
  return sessionStorage.getItem(TOKEN_KEY) ?? "";
}

export function setToken(value: string): void {
  if (value) sessionStorage.setItem(TOKEN_KEY, value);
  else sessionStorage.removeItem(TOKEN_KEY);
}

const bearer: Interceptor = (next) => (request) => {
  const t = token();
  if (t) request.header.set("authorization", `Bearer ${t}`);
  return next(request);
};

export const api: Client<typeof RankingService> = createClient(
  RankingService,
  createGrpcWebTransport({
    baseUrl: location.origin,
    interceptors: [bearer],
    // Reads answer in milliseconds; a call still open after this is reported, not awaited.
    defaultTimeoutMs: 15_000,
  }),
);

/** What went wrong with a call, in words for the page. */
export function describe(error: unknown): string {
  const e = ConnectError.from(error);
  switch (e.code) {
    case Code.Unauthenticated:
      return token()
        ? `The service refused this token (${e.rawMessage}). Enter another one.`
        : "The service requires a token. Enter one to continue.";
    case Code.NotFound:
      return `Not found: ${e.rawMessage}`;
    case Code.InvalidArgument:
      return `Refused: ${e.rawMessage}`;
    case Code.Unavailable:
      return `The service is unavailable (${e.rawMessage}); retrying.`;
    default:
      return `${Code[e.code] ?? e.code}: ${e.rawMessage}`;
  }
}

export function isUnauthenticated(error: unknown): boolean {
  return ConnectError.from(error).code === Code.Unauthenticated;
}

export function isNotFound(error: unknown): boolean {
  return ConnectError.from(error).code === Code.NotFound;
}

export function isAborted(error: unknown): boolean {
  return ConnectError.from(error).code === Code.Canceled;
}

/** What this tab's token opens, as the service says (GetAccess); nothing when it cannot be asked. */
export async function access(): Promise<{ read: boolean; write: boolean; catalog: boolean; admin: boolean }> {
  try {
    return await api.getAccess({});
  } catch {
    return { read: false, write: false, catalog: false, admin: false };
  }
}
