// Per-node latency: each node's percentiles (p50, p90, p99, p99.9, max) by bucket and command, and the cluster's,
// from `/settee/timings` (the same histograms GET_CMD_TIMER and `settee timings` read; counted since each node
// started). Refreshed every 5 seconds.
'use strict';

Views.latency = {
  title: 'Latency',
  render(root) {
    const error = el('p', { class: 'error', role: 'alert' });
    const body = el('div', { id: 'latency' });
    root.append(el('h1', {}, 'Command latency'),
      el('p', { class: 'muted' }, 'From each request decoded to its reply queued, since the node started. ' +
        'A percentile is the upper bound of the histogram bucket it falls in.'), error, body);
    return every(5000, async () => {
      const t = await Api.get('/settee/timings');
      const parts = [el('h2', {}, 'Cluster'), latencyTable(t.cluster, t.percentiles, 'cluster')];
      for (const n of t.nodes) {
        parts.push(el('h2', {}, n.hostname));
        parts.push(n.error ? el('p', { class: 'error' }, n.error) : latencyTable(n.buckets, t.percentiles, n.hostname));
      }
      body.replaceChildren(...parts);
    }, error);
  },
};

function latencyTable(buckets, percentiles, scope) {
  const rows = [];
  for (const [bucket, ops] of Object.entries(buckets || {})) {
    for (const [op, s] of Object.entries(ops)) {
      rows.push(el('tr', { 'data-scope': scope, 'data-bucket': bucket, 'data-op': op },
        el('td', {}, bucket), el('td', {}, op), el('td', { class: 'num' }, number(s.count)),
        percentiles.map(p => el('td', { class: 'num' }, micros(s[p]))), el('td', { class: 'num' }, micros(s.max))));
    }
  }
  if (!rows.length) return el('p', { class: 'muted' }, 'No operations yet.');
  const num = label => ({ label, attrs: { class: 'num' } });
  return table(['Bucket', 'Command', num('Count'), ...percentiles.map(num), num('max')], rows, { class: 'latency' });
}
