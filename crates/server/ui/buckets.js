// Buckets: the list (type, items, memory, quota, disk) and, for the bucket picked, live charts from
// `/pools/default/buckets/<b>/stats` (Couchbase's `op.samples`, the last minute per second: ops/s, gets and sets,
// items, resident ratio, disk write queue) and a latency chart from `/settee/timings` (the bucket's GET and SET
// p99 across the cluster, since the node started, one point per poll). Refreshed every 2 seconds.
'use strict';

Views.buckets = {
  title: 'Buckets',
  render(root, params) {
    const error = el('p', { class: 'error', role: 'alert' });
    const list = el('div', { id: 'bucket-list' });
    const picked = el('select', { id: 'bucket-pick' });
    const charts = {
      ops: new LineChart('Operations per second', v => number(v, 1)),
      getset: new LineChart('Gets and sets per second', v => number(v, 1), ['gets', 'sets']),
      items: new LineChart('Items', v => number(v)),
      resident: new LineChart('Active resident ratio', v => number(v, 1) + ' %'),
      queue: new LineChart('Disk write queue', v => number(v)),
      latency: new LineChart('Latency p99 (since start)', micros, ['GET', 'SET']),
    };
    charts.ops.canvas.id = 'chart-ops';
    charts.latency.canvas.id = 'chart-latency';
    root.append(el('h1', {}, 'Buckets'), error, list,
      el('div', { class: 'row' }, el('label', {}, 'Statistics of ', picked)),
      el('div', { class: 'charts' }, Object.values(charts).map(c => c.node)));
    let current = params.get('bucket') || '';
    picked.addEventListener('change', () => {
      current = picked.value;
      charts.latency.set([], [[], []]);
    });
    return every(2000, async () => {
      const buckets = await Api.get('/pools/default/buckets');
      if (!current && buckets.length) current = buckets[0].name;
      renderList(list, buckets);
      if (picked.options.length !== buckets.length) {
        picked.replaceChildren(...buckets.map(b => el('option', { value: b.name }, b.name)));
      }
      picked.value = current;
      if (!current) return;
      const [stats, timings] = await Promise.all([
        Api.get(`/pools/default/buckets/${encodeURIComponent(current)}/stats?zoom=minute`),
        Api.get('/settee/timings').catch(() => null),
      ]);
      const s = stats.op.samples;
      const col = name => s[name] || s.timestamp.map(() => null);
      charts.ops.set(s.timestamp, [col('ops')]);
      charts.getset.set(s.timestamp, [col('cmd_get'), col('cmd_set')]);
      charts.items.set(s.timestamp, [col('curr_items')]);
      charts.resident.set(s.timestamp, [col('vb_active_resident_items_ratio')]);
      charts.queue.set(s.timestamp, [col('disk_write_queue')]);
      if (timings) {
        const ops = (timings.cluster || {})[current] || {};
        const p99 = op => (ops[op] ? ops[op]['p99'] : null);
        charts.latency.push(Date.now(), [p99('GET'), p99('SET')], 60);
      }
    }, error);
  },
};

function renderList(node, buckets) {
  node.replaceChildren(table(
    ['Bucket', 'Type', { label: 'Items', attrs: { class: 'num' } }, { label: 'Memory used', attrs: { class: 'num' } },
      { label: 'Quota', attrs: { class: 'num' } }, { label: 'Disk used', attrs: { class: 'num' } }],
    buckets.map(b => {
      const s = b.basicStats || {};
      return el('tr', { 'data-bucket': b.name },
        el('td', {}, el('a', { href: '#/buckets?bucket=' + encodeURIComponent(b.name) }, b.name)),
        el('td', {}, b.bucketType === 'membase' ? 'couchbase' : b.bucketType),
        el('td', { class: 'num', 'data-items': String(s.itemCount) }, number(s.itemCount)),
        el('td', { class: 'num' }, bytes(s.memUsed)),
        el('td', { class: 'num' }, bytes((b.quota || {}).ram)),
        el('td', { class: 'num' }, bytes(s.diskUsed)));
    }), { id: 'buckets-table' }));
}
