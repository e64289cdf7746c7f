// The query workbench: a SQL++ statement posted to the query service through the management port's proxy
// (`/_p/query/query/service`, as Couchbase's console does), with the status, metrics, errors and rows shown.
'use strict';

Views.query = {
  title: 'Query',
  render(root) {
    const editor = el('textarea', { id: 'query-editor', spellcheck: 'false' });
    editor.style.minHeight = '7em';
    editor.value = sessionStorage.getItem('settee.query') || 'SELECT RAW name FROM system:keyspaces';
    const status = el('p', { id: 'query-status', class: 'muted' });
    const error = el('p', { class: 'error', role: 'alert', id: 'query-error' });
    const result = el('pre', { class: 'result', id: 'query-result' });
    const run = async () => {
      sessionStorage.setItem('settee.query', editor.value);
      status.textContent = 'Running…';
      error.textContent = '';
      result.textContent = '';
      result.removeAttribute('data-rows');
      try {
        const r = await Api.query(editor.value);
        const m = r.metrics || {};
        status.textContent = `${r.status}: ${m.resultCount || 0} rows in ${m.elapsedTime || '?'}` +
          (m.mutationCount ? `, ${m.mutationCount} mutations` : '');
        result.setAttribute('data-rows', String((r.results || []).length));
        result.textContent = JSON.stringify(r.results, null, 2);
        if (r.errors) error.textContent = r.errors.map(x => `${x.code}: ${x.msg}`).join('\n');
      } catch (e) {
        status.textContent = '';
        error.textContent = e.message;
      }
    };
    editor.addEventListener('keydown', e => { if (e.key === 'Enter' && (e.ctrlKey || e.metaKey)) run(); });
    root.append(el('h1', {}, 'Query workbench'), editor,
      el('div', { class: 'row' }, el('button', { id: 'query-run', type: 'button', onclick: run }, 'Execute'),
        el('span', { class: 'muted' }, 'Ctrl+Enter runs the statement.')),
      status, error, result);
    return () => {};
  },
};
