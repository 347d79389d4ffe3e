// A handoff card's drafted reply (the queue page): the bot's answer to the open question
// with its sources, never sent on its own. Staff edit it and send it in the client's chat
// as their own reply (POST /v1/handoffs/{id}/messages with `from_draft`; an open handoff
// is claimed first), or dismiss it (POST /v1/handoffs/{id}/draft/dismiss). Edits survive
// the queue's refreshes until sent.
(function () {
  "use strict";
  var staff = window.SupportbotStaff, api = staff.api, el = staff.el;  // staff.js
  var edited = new Map();  // handoff id -> the text as the staff member left it

  function sources(citations) {
    var ul = el("ul", null, "hq-draft-sources");
    citations.forEach(function (c) {
      var li = el("li");
      var name = c.title + " (" + c.source + ")";
      if (c.url) {
        var a = el("a", name);
        a.href = c.url; a.target = "_blank"; a.rel = "noopener";
        li.appendChild(a);
      } else li.textContent = name;
      ul.appendChild(li);
    });
    return ul;
  }

  // `h`: the handoff (HandoffOut); `me`: the staff member signed in; `errors`: where a
  // failure is told; `done`: called once the draft is sent or dismissed (the queue
  // refreshes). Nothing (an empty fragment) once the draft is settled.
  function box(h, me, errors, done) {
    var d = h.draft, path = "/v1/handoffs/" + h.id;
    if (d.status === "sent" || d.status === "dismissed") return document.createDocumentFragment();
    var section = el("section", null, "hq-draft");
    section.setAttribute("aria-label", "Drafted reply");
    section.appendChild(el("h3", "Drafted reply"));
    if (d.status === "drafting") {
      section.appendChild(el("p", "The bot is drafting a reply…", "hq-empty"));
      return section;
    }
    if (d.status === "none") {
      section.appendChild(el("p", "No draft: " + d.reason, "hq-empty"));
      return section;
    }
    var theirs = h.status === "claimed" && h.claimed_by !== me;
    var input = el("textarea");
    input.id = "hq-draft-" + h.id; input.rows = 8;
    input.value = edited.has(h.id) ? edited.get(h.id) : d.text;
    input.addEventListener("input", function () { edited.set(h.id, input.value); });
    var label = el("label", "Drafted reply, yours to edit", "sb-visually-hidden");
    label.htmlFor = input.id;
    section.append(label, input);
    section.appendChild(el("p", "Sources", "hq-draft-label"));
    section.appendChild(d.citations.length ? sources(d.citations) : el("p", "none", "hq-empty"));
    var actions = el("div", null, "hq-actions");
    // Named apart from the card's Claim and Send buttons.
    var send = el("button", "Reply with draft");
    send.type = "button";
    if (h.status === "open") send.title = "Claims the handoff, then sends the draft as your reply";
    send.disabled = theirs;
    var dismiss = el("button", "Dismiss draft", "sb-secondary");
    dismiss.type = "button";
    actions.append(send, dismiss);
    if (theirs) actions.appendChild(el("span", "claimed by " + h.claimed_by + ": only they send it", "hq-empty"));
    section.appendChild(actions);

    async function settle(button, work) {
      button.disabled = true; errors.textContent = "";
      try { await work(); edited.delete(h.id); } catch (e) { errors.textContent = e.message; button.disabled = false; return; }
      await done();
    }
    send.addEventListener("click", function () {
      if (!input.value.trim()) { errors.textContent = "The draft is empty."; return; }
      settle(send, async function () {
        if (h.status === "open") await api("POST", path + "/claim");
        await api("POST", path + "/messages", { text: input.value, from_draft: true });
      });
    });
    dismiss.addEventListener("click", function () {
      settle(dismiss, function () { return api("POST", path + "/draft/dismiss"); });
    });
    return section;
  }

  window.SupportbotDrafts = { box: box };
})();
