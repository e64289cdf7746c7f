// Users and roles: the local users with their roles (`/settings/rbac/users`), and the roles the cluster knows
// (`/settings/rbac/roles`). Reading them needs a security administrator; others see the refusal.
'use strict';

Views.security = {
  title: 'Users & roles',
  render(root) {
    const error = el('p', { class: 'error', role: 'alert' });
    const users = el('div', { id: 'users' });
    const roles = el('div', { id: 'roles' });
    root.append(el('h1', {}, 'Users and roles'), error, el('h2', {}, 'Users'), users, el('h2', {}, 'Roles'), roles);
    const roleName = r => r.role + (r.bucket_name ? `[${[r.bucket_name, r.scope_name, r.collection_name].filter(Boolean).join(':')}]` : '');
    Promise.all([Api.get('/settings/rbac/users'), Api.get('/settings/rbac/roles')]).then(([u, r]) => {
      users.replaceChildren(table(['User', 'Name', 'Domain', 'Roles'], u.map(x =>
        el('tr', { 'data-user': x.id }, el('td', {}, x.id), el('td', {}, x.name || ''), el('td', {}, x.domain),
          el('td', {}, (x.roles || []).map(roleName).join(', '))))));
      roles.replaceChildren(table(['Role', 'Name', 'Description'], r.map(x =>
        el('tr', {}, el('td', {}, roleName(x)), el('td', {}, x.name || ''), el('td', { class: 'muted' }, x.desc || '')))));
    }).catch(e => { error.textContent = e.message; });
    return () => {};
  },
};
