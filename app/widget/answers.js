// Answers from the support team: the form that saves one (from a staff reply in the
// handoff queue, from a knowledge-gap topic on Insights, or new on the answers page) and
// the answers page itself (answers.html: list, edit, disable, delete). A saved answer is
// in the knowledge base at once: the bot answers the next customer with it.
(function () {
  "use strict";
  var staff = window.SupportbotStaff, api = staff.api, el = staff.el;  // staff.js
  var PAGE = "/widget/static/answers.html";

  // Its own stylesheet, on whichever staff page loads this script.
  if (!document.querySelector('link[href="/widget/static/answers.css"]')) {
    var sheet = document.createElement("link");
    sheet.rel = "stylesheet"; sheet.href = "/widget/static/answers.css";
    document.head.appendChild(sheet);
  }

  function labelled(text, input) {
    var label = el("label", text, "an-field");
    label.appendChild(input);
    return label;
  }

  function lines(text) {
    return text.split("\n").map(function (l) { return l.trim(); }).filter(Boolean);
  }

  // The form, in a dialog over the page (a refresh of the page under it keeps it). `draft`:
  // { id (to edit one), question, variants, answer }. Resolves with the saved answer, or
  // null when cancelled.
  function open(draft) {
    return new Promise(function (resolve) {
      var dialog = el("dialog", null, "an-dialog");
      dialog.setAttribute("aria-label", draft.id ? "Edit the answer" : "Save as answer");
      var form = el("form", null, "an-form");
      form.method = "dialog";
      form.appendChild(el("h2", draft.id ? "Edit answer #" + draft.id : "Save as answer"));
      var question = el("input");
      question.name = "question"; question.required = true; question.value = draft.question || "";
      var variants = el("textarea");
      variants.name = "variants"; variants.rows = 3; variants.value = (draft.variants || []).join("\n");
      variants.placeholder = "one wording a line";
      var answer = el("textarea");
      answer.name = "answer"; answer.rows = 6; answer.required = true; answer.value = draft.answer || "";
      form.append(
        labelled("Question", question),
        labelled("Other wordings (one per line)", variants),
        labelled("Answer (Markdown)", answer)
      );
      var error = el("p", null, "sb-error");
      error.setAttribute("role", "alert");
      var buttons = el("div", null, "an-buttons");
      var save = el("button", "Save answer");
      save.type = "submit";
      var cancel = el("button", "Cancel", "sb-secondary");
      cancel.type = "button";
      buttons.append(save, cancel);
      form.append(error, buttons);
      dialog.appendChild(form);
      document.body.appendChild(dialog);

      function close(saved) { dialog.close(); dialog.remove(); resolve(saved); }
      cancel.addEventListener("click", function () { close(null); });
      dialog.addEventListener("cancel", function (e) { e.preventDefault(); close(null); });
      form.addEventListener("submit", async function (e) {
        e.preventDefault();
        save.disabled = true; error.textContent = "";
        var body = { question: question.value, variants: lines(variants.value), answer: answer.value };
        try {
          var saved = draft.id
            ? await api("PATCH", "/v1/answers/" + draft.id, body)
            : await api("POST", "/v1/answers", body);
          close(saved);
        } catch (err) { error.textContent = err.message; save.disabled = false; }
      });
      dialog.showModal();
      question.focus();
    });
  }

  // Where a page says what was saved: a line with a link to the answers page.
  function told(saved, where) {
    if (!saved || !where) return;
    var note = el("p", null, "an-saved");
    note.setAttribute("role", "status");
    note.append("Saved as answer #" + saved.id + ": the bot answers with it from now on. ");
    var link = el("a", "All answers", "sb-link");
    link.href = PAGE;
    note.appendChild(link);
    where.replaceChildren(note);
  }

  // A status line under the page's header, kept across the page's refreshes.
  function pageStatus() {
    var status = document.getElementById("an-status");
    if (!status) {
      status = el("div");
      status.id = "an-status";
      document.querySelector("main header").after(status);
    }
    return status;
  }

  // The handoff queue's hook: a staff message of a transcript gets "Save as answer",
  // prefilled with the reply and the customer's last question before it (the server's
  // draft: the rule Telegram's /save follows too).
  function offer(line, message) {
    if (message.role !== "staff") return;
    // Labelled by its stylesheet (answers.css) and aria-label: the line's text stays the
    // message's.
    var button = el("button", null, "sb-link an-offer");
    button.type = "button";
    button.setAttribute("aria-label", "Save as answer");
    button.addEventListener("click", async function () {
      var status = pageStatus();
      try {
        var draft = await api("GET", "/v1/answers/draft/" + message.id);
        told(await open(draft), status);
      } catch (e) { status.replaceChildren(el("p", e.message, "sb-error")); }
    });
    line.appendChild(button);
  }

  // Insights' hook: a knowledge-gap topic gets "Write the answer", prefilled with its
  // questions (the first as the question, the rest as other wordings).
  function writeFor(group, where) {
    var button = el("button", "Write the answer", "sb-secondary an-write");
    button.type = "button";
    button.addEventListener("click", async function () {
      var questions = group.examples.map(function (q) { return q.question; });
      var saved = await open({ question: questions[0] || group.name, variants: questions.slice(1) });
      told(saved, status);
    });
    var status = el("div");
    where.append(button, status);
  }

  window.SupportbotAnswers = { open: open, offer: offer, writeFor: writeFor };

  // --- the answers page --------------------------------------------------------------------
  var list = document.getElementById("an-list");
  if (!list) return;
  var errors = document.getElementById("an-error");

  function act(button, work) {
    button.addEventListener("click", async function () {
      button.disabled = true; errors.textContent = "";
      try { await work(); await refresh(); } catch (e) { errors.textContent = e.message; }
      button.disabled = false;
    });
  }

  function item(a) {
    var article = el("article", null, "an-card");
    article.dataset.answer = a.id;
    article.dataset.enabled = String(a.enabled);
    var title = el("h2", a.question);
    title.appendChild(el("span", a.enabled ? "in use" : "disabled", "an-state"));
    article.appendChild(title);
    if (a.variants.length) {
      var wordings = el("ul", null, "an-variants");
      a.variants.forEach(function (v) { wordings.appendChild(el("li", v)); });
      article.appendChild(wordings);
    }
    article.appendChild(el("p", a.answer, "an-answer"));
    var when = a.updated_at.slice(0, 10);
    article.appendChild(el("p", "#" + a.id + " by " + (a.author || "staff") + ", " + when + " · " +
      (a.languages.join(", ") || "language unknown") + " · collection " + a.collection, "an-meta"));
    var actions = el("div", null, "an-buttons");
    var edit = el("button", "Edit", "sb-secondary");
    edit.type = "button";
    act(edit, function () { return open(a); });
    var toggle = el("button", a.enabled ? "Disable" : "Enable", "sb-secondary");
    toggle.type = "button";
    act(toggle, function () { return api("PATCH", "/v1/answers/" + a.id, { enabled: !a.enabled }); });
    var remove = el("button", "Delete", "sb-secondary");
    remove.type = "button";
    act(remove, function () {
      if (!window.confirm("Delete the answer “" + a.question + "”? The bot stops using it.")) return null;
      return api("DELETE", "/v1/answers/" + a.id);
    });
    actions.append(edit, toggle, remove);
    article.appendChild(actions);
    return article;
  }

  async function refresh() {
    var answers = await api("GET", "/v1/answers");
    list.replaceChildren();
    if (!answers.length) list.appendChild(el("p", "No answers yet: save one from a staff reply in the handoff queue, or write one here.", "an-empty"));
    answers.forEach(function (a) { list.appendChild(item(a)); });
  }

  var create = document.getElementById("an-new");
  act(create, function () { return open({}); });

  staff.signIn(async function (name) {
    document.getElementById("an-me").textContent = "Signed in as " + name;
    list.hidden = false; create.hidden = false;
    try { await refresh(); } catch (e) { errors.textContent = e.message; }
  });
})();
