// Case 2 — ranking consistency (50 VUs): what was written is what is read back. setup()
// records p·10 views for 50 fresh products (main score p) and recomputes; every read must
// then return main_floor p and the order of the main scores.
import grpc from 'k6/net/grpc';
import { check } from 'k6';
import { connect, event, invoke, OK } from './common.js';

export const options = {
  scenarios: { consistency: { executor: 'constant-vus', vus: 50, duration: '15s' } },
  thresholds: { checks: ['rate==1.0'], grpc_req_duration: ['p(95)<300'] },
};

const client = new grpc.Client();

export function setup() {
  const base = 900000000 + (Date.now() % 1000000) * 100; // fresh product ids per run
  connect(client);
  const events = [];
  for (let p = 1; p <= 50; p++) {
    for (let i = 0; i < p * 10; i++) events.push(event(`k6-c-${base}-${p}-${i}`, base + p, 'EVENT_TYPE_VIEW'));
  }
  for (let i = 0; i < events.length; i += 5000) {
    const recorded = invoke(client, 'RecordEvents', { events: events.slice(i, i + 5000) });
    if (recorded.status !== OK) throw new Error(`setup RecordEvents: ${recorded.error && recorded.error.message}`);
  }
  const recomputed = invoke(client, 'Recompute', {});
  if (recomputed.status !== OK) throw new Error('setup Recompute failed');
  client.close();
  return { base: base };
}

export default function (data) {
  if (__ITER === 0) connect(client);
  const p = 1 + ((__VU + __ITER) % 50);
  const r = invoke(client, 'GetRank', { product_id: data.base + p });
  check(r, {
    'GetRank OK': (x) => x.status === OK,
    'main_floor is what was written': (x) => x.status === OK && Number(x.message.product.breakdown.mainFloor) === p,
  });
}
