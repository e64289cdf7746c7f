// Scopes and collections of a bucket, from `/pools/default/buckets/<b>/scopes`.
'use strict';

Views.collections = {
  title: 'Scopes & collections',
  render(root, params) {
    const error = el('p', { class: 'error', role: 'alert' });
    const pick = el('select', { id: 'collections-bucket' });
    const body = el('div', { id: 'collections' });
    root.append(el('h1', {}, 'Scopes and collections'), error,
      el('div', { class: 'row' }, el('label', {}, 'Bucket ', pick)), body);
    const show = async () => {
      const m = await Api.get(`/pools/default/buckets/${encodeURIComponent(pick.value)}/scopes`);
      const rows = [];
      const e = encodeURIComponent;
      for (const s of m.scopes) {
        for (const c of s.collections) {
          const link = `#/documents?bucket=${e(pick.value)}&scope=${e(s.name)}&collection=${e(c.name)}`;
          rows.push(el('tr', { 'data-keyspace': `${s.name}.${c.name}` }, el('td', {}, s.name), el('td', {}, c.name),
            el('td', { class: 'num' }, c.uid), el('td', { class: 'num' }, c.maxTTL ? c.maxTTL + ' s' : '-'),
            el('td', {}, el('a', { href: link }, 'documents'))));
        }
      }
      body.replaceChildren(el('p', { class: 'muted' }, `Manifest uid ${m.uid}`),
        table(['Scope', 'Collection', { label: 'uid', attrs: { class: 'num' } }, { label: 'Max TTL', attrs: { class: 'num' } }, ''], rows));
    };
    pick.addEventListener('change', () => show().catch(e => { error.textContent = e.message; }));
    Api.get('/pools/default/buckets').then(buckets => {
      pick.replaceChildren(...buckets.map(b => el('option', { value: b.name }, b.name)));
      if (params.get('bucket')) pick.value = params.get('bucket');
      if (pick.value) return show();
      body.textContent = 'No bucket.';
    }).catch(e => { error.textContent = e.message; });
    return () => {};
  },
};
