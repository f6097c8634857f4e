// Case 1 — functional: every RPC answers as specified under light load (10-20 VUs).
import grpc from 'k6/net/grpc';
import { check } from 'k6';
import { connect, event, invoke, OK } from './common.js';

export const options = {
  scenarios: {
    functional: { executor: 'ramping-vus', startVUs: 10, stages: [{ duration: '5s', target: 20 }, { duration: '10s', target: 20 }] },
  },
  thresholds: { checks: ['rate>0.99'], grpc_req_duration: ['p(95)<200'] },
};

const client = new grpc.Client();
const run = Date.now();

export default function () {
  if (__ITER === 0) connect(client);
  const id = `k6-f-${run}-${__VU}-${__ITER}`;
  const product = 1 + ((__VU * 7 + __ITER) % 50);
  const delivery = { event: event(id, product, 'EVENT_TYPE_VIEW') };
  const first = invoke(client, 'RecordEvent', delivery);
  check(first, { 'RecordEvent OK': (r) => r.status === OK, 'first delivery ACCEPTED': (r) => r.message && r.message.outcome === 'RECORD_OUTCOME_ACCEPTED' });
  const again = invoke(client, 'RecordEvent', delivery); // the same event delivered twice
  check(again, { 'redelivery DUPLICATE': (r) => r.status === OK && r.message.outcome === 'RECORD_OUTCOME_DUPLICATE' });
  const bad = invoke(client, 'RecordEvent', { event: event(`${id}-bad`, 0, 'EVENT_TYPE_VIEW') });
  check(bad, { 'product_id 0 is INVALID_ARGUMENT': (r) => r.status === grpc.StatusInvalidArgument });
  const top = invoke(client, 'GetTopN', { limit: 20 });
  check(top, { 'GetTopN OK': (r) => r.status === OK });
  const hourly = invoke(client, 'GetTopN', { window: 'WINDOW_HOURLY', limit: 5 });
  check(hourly, { 'hourly GetTopN OK': (r) => r.status === OK && r.message.products.length > 0 });
}
