// What the staff pages (handoff queue, Insights) share: the sign-in the assistant stored
// (widget.js), calls to the API with it, and a small element builder.
(function () {
  "use strict";
  var TOKEN_KEY = "supportbot.token";

  function headers() {
    var h = { "content-type": "application/json" };
    var token = localStorage.getItem(TOKEN_KEY);
    if (token) h.authorization = "Bearer " + token;
    return h;
  }

  async function api(method, path, body) {
    var r = await fetch(path, { method: method, headers: headers(), body: body ? JSON.stringify(body) : undefined });
    var data = await r.json().catch(function () { return {}; });
    if (!r.ok) throw new Error(data.detail || ("HTTP " + r.status));
    return data;
  }

  function el(tag, text, className) {
    var node = document.createElement(tag);
    if (text !== undefined && text !== null) node.textContent = text;
    if (className) node.className = className;
    return node;
  }

  async function me() {
    var r = await fetch("/v1/widget/me", { headers: headers() });
    return r.ok ? (await r.json()).name : null;
  }

  // The page's sign-in: `show(name)` once a stored or typed-in token is accepted.
  function signIn(show) {
    var form = document.getElementById("sb-login");
    form.addEventListener("submit", async function (e) {
      e.preventDefault();
      localStorage.setItem(TOKEN_KEY, document.getElementById("sb-token").value.trim());
      var name = await me();
      if (name) { form.hidden = true; await show(name); return; }
      localStorage.removeItem(TOKEN_KEY);
      document.getElementById("sb-login-error").textContent = "That token was not accepted.";
    });
    me().then(function (name) {
      if (name) { form.hidden = true; show(name); return; }
      form.hidden = false;
      document.getElementById("sb-token").focus();
    });
  }

  window.SupportbotStaff = { api: api, el: el, signIn: signIn };
})();
