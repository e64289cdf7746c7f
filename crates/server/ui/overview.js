// Cluster overview: the nodes (status, membership, services, memory), the cluster's memory quota and the buckets'
// disk use, and rebalance progress from `/pools/default/tasks`. Refreshed every 3 seconds.
'use strict';

Views.overview = {
  title: 'Overview',
  render(root) {
    const error = el('p', { class: 'error', role: 'alert' });
    const cards = el('div', { class: 'cards' });
    const rebalance = el('div', { id: 'rebalance' });
    const nodes = el('div', { id: 'nodes' });
    root.append(el('h1', {}, 'Cluster overview'), error, cards, el('h2', {}, 'Rebalance'), rebalance,
      el('h2', {}, 'Nodes'), nodes);
    return every(3000, async () => {
      const [pool, tasks, buckets] = await Promise.all([
        Api.get('/pools/default'), Api.get('/pools/default/tasks'), Api.get('/pools/default/buckets').catch(() => []),
      ]);
      const ram = (pool.storageTotals || {}).ram || {};
      const disk = buckets.reduce((n, b) => n + ((b.basicStats || {}).diskUsed || 0), 0);
      cards.replaceChildren(
        card('Nodes', String(pool.nodes.length)),
        card('Buckets', String(buckets.length)),
        card('Memory quota used', bytes(ram.quotaUsed) + ' of ' + bytes(ram.quotaTotal)),
        card('Memory used by data', bytes(ram.usedByData)),
        card('Disk used by buckets', bytes(disk)),
        card('Balanced', pool.balanced === false ? 'no' : 'yes'));
      rebalance.replaceChildren(renderRebalance(tasks));
      nodes.replaceChildren(table(
        ['Node', 'Status', 'Membership', 'Services', 'Version', { label: 'Items', attrs: { class: 'num' } },
          { label: 'Memory used', attrs: { class: 'num' } }, { label: 'Uptime', attrs: { class: 'num' } }],
        pool.nodes.map(n => {
          const s = n.interestingStats || {};
          return el('tr', { 'data-node': n.hostname },
            el('td', {}, n.hostname, n.thisNode ? el('span', { class: 'muted' }, ' (this node)') : null),
            el('td', { class: n.status === 'healthy' ? 'ok' : 'error' }, n.status),
            el('td', {}, n.clusterMembership || '-'),
            el('td', {}, (n.services || []).join(', ')),
            el('td', {}, n.version || '-'),
            el('td', { class: 'num' }, s.curr_items === undefined ? '-' : number(s.curr_items)),
            el('td', { class: 'num' }, s.mem_used === undefined ? '-' : bytes(s.mem_used)),
            el('td', { class: 'num' }, n.uptime === undefined ? '-' : n.uptime + ' s'));
        }), { id: 'nodes-table' }));
    }, error);
  },
};

function renderRebalance(tasks) {
  const task = (tasks || []).find(t => t.type === 'rebalance');
  if (!task) return el('p', { class: 'muted' }, 'No rebalance information.');
  if (task.status === 'running') {
    const pct = Math.max(0, Math.min(100, task.progress || 0));
    const fill = el('span');
    fill.style.width = pct + '%'; // through the CSSOM: the page's CSP refuses inline style attributes
    return el('p', {}, 'Rebalance running: ', el('span', { class: 'bar' }, fill),
      ` ${pct.toFixed(1)} % (${task.movesDone || 0} of ${task.movesTotal || 0} moves)`);
  }
  return el('p', { class: 'muted' }, 'No rebalance running.' +
    (task.errorMessage ? ' Last rebalance failed: ' + task.errorMessage : ''));
}
