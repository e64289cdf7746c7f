// The console's frame: sign-in, the navigation and the routes (`#/<view>?<params>`). Loaded last, after every view.
'use strict';

(() => {
  const loginView = document.getElementById('login-view');
  const view = document.getElementById('view');
  const nav = document.getElementById('nav');
  const whoami = document.getElementById('whoami');
  const logout = document.getElementById('logout');
  let stop = () => {};

  function signedIn(yes) {
    loginView.hidden = yes;
    view.hidden = !yes;
    nav.hidden = !yes;
    logout.hidden = !yes;
    whoami.textContent = yes ? Api.user() : '';
  }

  function route() {
    stop();
    stop = () => {};
    if (!Api.credentials()) {
      signedIn(false);
      view.replaceChildren();
      document.getElementById('login-user').focus();
      return;
    }
    signedIn(true);
    const [path, query] = (location.hash.replace(/^#\/?/, '') || 'overview').split('?');
    const name = Views[path] ? path : 'overview';
    for (const a of nav.querySelectorAll('a')) a.classList.toggle('active', a.getAttribute('href') === '#/' + name);
    document.title = Views[name].title + ' · settee console';
    view.replaceChildren();
    view.setAttribute('data-view', name);
    stop = Views[name].render(view, new URLSearchParams(query || '')) || (() => {});
  }

  document.getElementById('login-form').addEventListener('submit', async e => {
    e.preventDefault();
    const error = document.getElementById('login-error');
    error.textContent = '';
    const user = document.getElementById('login-user').value;
    const password = document.getElementById('login-password');
    try {
      await Api.login(user, password.value);
      password.value = '';
      route();
    } catch (err) {
      error.textContent = err.status === 401 ? 'Wrong user name or password.' : 'Cannot sign in: ' + err.message;
    }
  });
  logout.addEventListener('click', () => { Api.forget(); route(); });
  window.addEventListener('settee-signed-out', route);
  window.addEventListener('hashchange', route);
  route();
})();
