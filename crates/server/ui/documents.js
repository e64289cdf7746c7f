// The document browser: pick a bucket, scope and collection; look a document up by key, view and edit its JSON and
// save it (the REST document endpoint, an upsert), or delete it; list the collection's keys a page at a time
// through the query service's primary index (a collection without one says so).
'use strict';

const PAGE_KEYS = 20;

Views.documents = {
  title: 'Documents',
  render(root, params) {
    const error = el('p', { class: 'error', role: 'alert', id: 'doc-error' });
    const status = el('p', { class: 'ok', id: 'doc-status' });
    const bucket = el('select', { id: 'doc-bucket' });
    const scope = el('select', { id: 'doc-scope' });
    const collection = el('select', { id: 'doc-collection' });
    const key = el('input', { id: 'doc-key', placeholder: 'document key', size: '30' });
    const editor = el('textarea', { id: 'doc-editor', spellcheck: 'false' });
    const meta = el('p', { class: 'muted', id: 'doc-meta' });
    const keys = el('ul', { class: 'keys', id: 'doc-keys' });
    const pageInfo = el('span', { class: 'muted' });
    let manifest = { scopes: [] };
    let page = 0;
    const keyspace = () => [bucket.value, scope.value, collection.value];
    const say = (ok, text) => { status.textContent = ok ? text : ''; error.textContent = ok ? '' : text; };

    const lookup = async () => {
      const id = key.value;
      if (!id) return say(false, 'Type a document key.');
      try {
        const doc = await Api.get(docPath(...keyspace(), id));
        editor.value = doc.json !== undefined ? JSON.stringify(doc.json, null, 2) : '(binary, base64) ' + doc.base64;
        meta.textContent = `flags ${doc.meta.flags}, expiration ${doc.meta.expiration || 'none'}, rev ${doc.meta.rev}`;
        say(true, `Loaded ${id}.`);
      } catch (e) {
        editor.value = '';
        meta.textContent = '';
        say(false, e.status === 404 ? `No document ${id} in ${keyspace().join('.')}.` : e.message);
      }
    };
    const save = async () => {
      const id = key.value;
      let value;
      try { value = JSON.stringify(JSON.parse(editor.value)); } catch (e) { return say(false, 'Not JSON: ' + e.message); }
      if (!id) return say(false, 'Type a document key.');
      try {
        await Api.post(docPath(...keyspace(), id), { value });
        say(true, `Saved ${id}.`);
      } catch (e) { say(false, e.message); }
    };
    const remove = async () => {
      const id = key.value;
      if (!id || !confirm(`Delete ${id}?`)) return;
      try {
        await Api.del(docPath(...keyspace(), id));
        editor.value = '';
        say(true, `Deleted ${id}.`);
      } catch (e) { say(false, e.status === 404 ? `No document ${id}.` : e.message); }
    };
    const list = async () => {
      const [b, s, c] = keyspace();
      const stmt = `SELECT RAW META().id FROM ${ident(b)}.${ident(s)}.${ident(c)} ORDER BY META().id ` +
        `LIMIT ${PAGE_KEYS} OFFSET ${page * PAGE_KEYS}`;
      try {
        const r = await Api.query(stmt);
        keys.replaceChildren(...r.results.map(id => el('li', { 'data-key': id, onclick: () => { key.value = id; lookup(); } }, id)));
        pageInfo.textContent = r.results.length ? `keys ${page * PAGE_KEYS + 1} to ${page * PAGE_KEYS + r.results.length}` : 'no keys on this page';
        say(true, '');
      } catch (e) {
        keys.replaceChildren();
        const noIndex = /index/i.test(e.message) && e.body && e.body.errors && e.body.errors.some(x => x.code === 4000);
        say(false, noIndex ? `${b}.${s}.${c} has no primary index, so its keys cannot be listed. ` +
          `CREATE PRIMARY INDEX ON ${ident(b)}.${ident(s)}.${ident(c)} in the query workbench makes one. ` +
          'Looking documents up by key works without it.' : e.message);
      }
    };
    const fillCollections = () => {
      const sc = manifest.scopes.find(x => x.name === scope.value) || { collections: [] };
      collection.replaceChildren(...sc.collections.map(c => el('option', { value: c.name }, c.name)));
      if (params.get('collection')) collection.value = params.get('collection');
    };
    const fillScopes = async () => {
      manifest = await Api.get(`/pools/default/buckets/${encodeURIComponent(bucket.value)}/scopes`);
      scope.replaceChildren(...manifest.scopes.map(s => el('option', { value: s.name }, s.name)));
      scope.value = params.get('scope') || '_default';
      fillCollections();
    };
    bucket.addEventListener('change', () => fillScopes().catch(e => say(false, e.message)));
    scope.addEventListener('change', fillCollections);
    key.addEventListener('keydown', e => { if (e.key === 'Enter') lookup(); });

    root.append(el('h1', {}, 'Documents'),
      el('div', { class: 'row' }, el('label', {}, 'Bucket ', bucket), el('label', {}, 'Scope ', scope),
        el('label', {}, 'Collection ', collection)),
      el('div', { class: 'row' }, key, el('button', { id: 'doc-lookup', type: 'button', onclick: lookup }, 'Look up'),
        el('button', { id: 'doc-save', type: 'button', onclick: save }, 'Save'),
        el('button', { id: 'doc-delete', type: 'button', class: 'secondary', onclick: remove }, 'Delete')),
      error, status, meta, editor,
      el('h2', {}, 'Keys'),
      el('div', { class: 'row' },
        el('button', { id: 'doc-list', type: 'button', class: 'secondary', onclick: () => { page = 0; list(); } }, 'List keys'),
        el('button', { type: 'button', class: 'secondary', onclick: () => { page = Math.max(0, page - 1); list(); } }, 'Previous'),
        el('button', { type: 'button', class: 'secondary', onclick: () => { page += 1; list(); } }, 'Next'), pageInfo),
      keys);

    Api.get('/pools/default/buckets').then(async buckets => {
      bucket.replaceChildren(...buckets.map(b => el('option', { value: b.name }, b.name)));
      if (params.get('bucket')) bucket.value = params.get('bucket');
      if (bucket.value) await fillScopes();
      if (params.get('key')) { key.value = params.get('key'); await lookup(); }
    }).catch(e => say(false, e.message));
    return () => {};
  },
};
