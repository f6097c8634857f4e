// Case 4 — mixed (500-1,000 VUs): reads and writes together.
// The article's figure for this case: p95 5.5 s, ~165 TPS, 1.2-1.3 % errors.
import grpc from 'k6/net/grpc';
import { check } from 'k6';
import { Rate } from 'k6/metrics';
import { connect, event, invoke, OK } from './common.js';

const errors = new Rate('rpc_errors');

export const options = {
  scenarios: {
    mixed: { executor: 'ramping-vus', startVUs: 500, stages: [{ duration: '5s', target: 1000 }, { duration: '15s', target: 1000 }] },
  },
  thresholds: { rpc_errors: ['rate<0.02'], grpc_req_duration: ['p(95)<2000'] },
};

const client = new grpc.Client();
const run = Date.now();

export default function () {
  if (__ITER === 0) connect(client);
  const product = 1 + ((__VU * 31 + __ITER) % 200);
  let r;
  if (__ITER % 4 === 0) {
    const type = __ITER % 20 === 0 ? 'EVENT_TYPE_ORDER' : 'EVENT_TYPE_VIEW';
    r = invoke(client, 'RecordEvent', { event: event(`k6-m-${run}-${__VU}-${__ITER}`, product, type, type === 'EVENT_TYPE_ORDER' ? 15000 : 0) });
  } else if (__ITER % 2 === 0) {
    r = invoke(client, 'GetTopN', { limit: 20 });
  } else {
    r = invoke(client, 'GetRank', { product_id: product });
  }
  const ok = r.status === OK || r.status === grpc.StatusNotFound;
  errors.add(!ok);
  check(r, { 'answered': () => ok });
}
