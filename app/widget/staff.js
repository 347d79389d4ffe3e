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

  // The sign-in form's fields, built here so that every staff page has the same form.
  function fillSignInForm(form) {
    var label = el("label", "Staff token");
    label.htmlFor = "sb-token";
    var input = el("input");
    input.id = "sb-token";
    input.type = "password";
    input.autocomplete = "current-password";
    input.required = true;
    var button = el("button", "Sign in");
    button.type = "submit";
    var error = el("p", null, "sb-error");
    error.id = "sb-login-error";
    error.setAttribute("role", "alert");
    form.replaceChildren(label, input, button, error);
  }

  // The page's sign-in: `show(name)` once a stored or typed-in token is accepted.
  function signIn(show) {
    var form = document.getElementById("sb-login");
    fillSignInForm(form);
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
