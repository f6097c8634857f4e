// What every page is: given the main element, its address parameters and the shell's
// actions, it draws itself and returns what stops it (streams, timers) when the user leaves.
// The one way a page reports a failed call is here too.

import { describe, isUnauthenticated } from "./api";
import { say } from "./dom";

/** What a page is given. */
export interface PageContext {
  main: HTMLElement;
  params: URLSearchParams;
  navigate: (page: string, params: URLSearchParams) => void;
  askToken: () => void;
}

/** A page: draws into `main`, returns what stops it. */
export type Page = (context: PageContext) => () => void;

/**
 * Says on `status` what went wrong with a call (`message`, or the error in words), and opens
 * the token panel when the service refused the token.
 */
export function report(status: HTMLElement, error: unknown, askToken: () => void, message?: string, kind: "error" | "info" = "error"): void {
  say(status, message ?? describe(error), kind);
  if (isUnauthenticated(error)) askToken();
}
