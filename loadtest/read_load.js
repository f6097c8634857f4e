// Case 3 — read load (200-500 VUs): GetTopN(20) and GetRank from Redis only.
// The article's figure for this case: p95 79 ms at 1,851 TPS.
import grpc from 'k6/net/grpc';
import { check } from 'k6';
import { connect, invoke, OK } from './common.js';

export const options = {
  scenarios: {
    reads: { executor: 'ramping-vus', startVUs: 200, stages: [{ duration: '5s', target: 500 }, { duration: '15s', target: 500 }] },
  },
  // k6 itself shares the 2 cores of the development machine with the server and Redis; the
  // latency bound is set for that machine (see BENCHMARKS.md).
  thresholds: { checks: ['rate>0.99'], grpc_req_duration: ['p(95)<300'] },
};

const client = new grpc.Client();

export default function () {
  if (__ITER === 0) connect(client);
  const top = invoke(client, 'GetTopN', { limit: 20 });
  check(top, { 'GetTopN OK': (r) => r.status === OK });
  const rank = invoke(client, 'GetRank', { product_id: 1 + ((__VU * 13 + __ITER) % 50) });
  check(rank, { 'GetRank OK or NOT_FOUND': (r) => r.status === OK || r.status === grpc.StatusNotFound });
}
