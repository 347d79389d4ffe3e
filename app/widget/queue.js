// The handoff queue: conversations the bot handed to a person, each with its card (who,
// why, goal, constraints, what was asked and answered, pages, open question). Claim one,
// reply in the client's chat under your name, resolve it and the bot answers again. Each
// card shows the chat's latest messages and its people's memory (memory.js).
(function () {
  "use strict";
  var staff = window.SupportbotStaff, api = staff.api, el = staff.el;  // staff.js
  var memory = window.SupportbotMemory;  // memory.js
  var drafts = window.SupportbotDrafts;  // drafts.js
  var REFRESH_MS = 10000;
  var $ = function (id) { return document.getElementById(id); };
  var list = $("hq-list"), errors = $("hq-error");
  var me = null;
  var whole = new Set();  // the cards showing their whole transcript, across refreshes

  function field(dl, name, value) {
    dl.appendChild(el("dt", name));
    var dd = el("dd");
    if (Array.isArray(value)) {
      if (!value.length) dd.textContent = "none";
      else {
        var ul = el("ul");
        value.forEach(function (item) { ul.appendChild(el("li", item)); });
        dd.appendChild(ul);
      }
    } else dd.textContent = value || "none";
    dl.appendChild(dd);
  }

  // The latest messages, or all of them (`whole`); each line's id names its recall id.
  // Each memory block a turn sent the model is shown (folded) before the first message
  // whose turn sent it: what the model was told of these people.
  async function showTranscript(box, key, whole) {
    var conversation = await api("GET", "/v1/conversations/" + encodeURIComponent(key));
    var told = new Set();
    box.replaceChildren();
    var said = conversation.messages
      .filter(function (m) { return m.role === "user" || m.role === "staff" || (m.role === "assistant" && !m.tool_calls); });
    var shown = said.slice(whole ? 0 : -12);
    shown.forEach(function (m) {
      if (m.memory_block && !told.has(m.memory_block)) {
        told.add(m.memory_block);
        var block = el("details", null, "hq-told");
        block.appendChild(el("summary", "Memory sent to the model"));
        block.appendChild(el("pre", m.memory_block));
        box.appendChild(block);
      }
      var who = m.role === "assistant" ? "bot" : (m.author || m.role);
      var line = el("p", who + ": " + m.content, "hq-line");
      line.dataset.role = m.role;
      line.id = "msg-" + m.id; line.tabIndex = -1;
      if (window.SupportbotAnswers) window.SupportbotAnswers.offer(line, m);  // answers.js
      box.appendChild(line);
    });
    box.classList.toggle("hq-whole", !!whole);
    if (!whole) showLatest(box, said.length - shown.length);
  }

  // The latest messages that fit in the box, each whole: earlier ones are left out (and
  // counted) rather than scrolled half out of sight under the card's buttons.
  function showLatest(box, left) {
    var note = el("p", null, "hq-earlier");
    function count() { note.textContent = left + " earlier message" + (left === 1 ? "" : "s") + ": see the whole transcript"; }
    box.prepend(note); count();
    // The memory blocks stay (what the model was told), the earliest lines go; the last stays.
    var lines = box.querySelectorAll(".hq-line"), next = 0;
    while (box.scrollHeight > box.clientHeight && next < lines.length - 1) {
      lines[next++].remove(); left++; count();
    }
    if (!left) note.remove();
    box.scrollTop = 0;
  }

  // A message's line in the card's transcript, the whole transcript shown if it is older.
  function revealer(box, key) {
    return async function (recallId) {
      var line = box.querySelector("#msg-" + recallId);
      if (line) return line;
      await showTranscript(box, key, true);
      return box.querySelector("#msg-" + recallId);
    };
  }

  function act(button, work) {
    button.addEventListener("click", async function () {
      button.disabled = true; errors.textContent = "";
      try { await work(); } catch (e) { errors.textContent = e.message; }
      button.disabled = false;
      await refresh();
    });
  }

  function card(h) {
    var c = h.card, mine = h.status === "claimed" && h.claimed_by === me;
    var article = el("article", null, "hq-card");
    article.dataset.handoff = h.id;
    var title = el("h2", "#" + h.id + " " + c.conversation_key);
    var status = el("span", h.status === "claimed" ? "claimed by " + h.claimed_by : "open", "hq-status");
    status.dataset.status = h.status;
    title.appendChild(status);
    article.appendChild(title);
    var dl = el("dl");
    field(dl, "Reason", c.reason + (c.requested_by ? ", by " + c.requested_by : ""));
    field(dl, "Who", c.who.join(", "));
    field(dl, "Chat", c.channel);
    field(dl, "Goal", c.goal);
    field(dl, "Constraints", c.constraints);
    field(dl, "Asked and answered", c.exchanges.map(function (e) { return e.asked + " → " + e.answered; }));
    field(dl, "Pages cited", c.pages);
    field(dl, "Open question", c.open_question);
    article.appendChild(dl);
    article.appendChild(drafts.box(h, me, errors, refresh));
    var actions = el("div", null, "hq-actions");
    var box = el("div", null, "hq-transcript");
    box.id = "hq-transcript-" + h.id;
    // The whole conversation, read as a chat (the card's transcript_url is the API's JSON).
    var transcript = el("button", null, "sb-secondary");
    transcript.type = "button";
    transcript.setAttribute("aria-controls", box.id);
    transcript.addEventListener("click", async function () {
      var all = !whole.has(h.id);
      try { await showTranscript(box, c.conversation_key, all); } catch (e) { errors.textContent = e.message; return; }
      if (all) whole.add(h.id); else whole.delete(h.id);
      shownAs(all);
    });
    function shownAs(all) {
      transcript.setAttribute("aria-expanded", String(all));
      transcript.textContent = all ? "Latest messages" : "Whole transcript";
      box.setAttribute("aria-label", all ? "Whole transcript" : "Latest messages");
    }
    shownAs(whole.has(h.id));
    actions.appendChild(transcript);
    if (h.status === "open") {
      var claim = el("button", "Claim");
      claim.type = "button";
      act(claim, function () { return api("POST", "/v1/handoffs/" + h.id + "/claim"); });
      actions.appendChild(claim);
    }
    if (mine) {
      var resolve = el("button", "Resolve", "sb-secondary");
      resolve.type = "button";
      act(resolve, function () { return api("POST", "/v1/handoffs/" + h.id + "/resolve"); });
      actions.appendChild(resolve);
    }
    article.appendChild(actions);
    if (mine) {
      var form = el("form", null, "hq-reply");
      var label = el("label", "Reply to the client", "sb-visually-hidden");
      var input = el("textarea");
      input.id = "hq-reply-" + h.id; label.htmlFor = input.id;
      input.rows = 2; input.required = true;
      input.placeholder = "Reply in the client's chat as " + me + "…";
      var send = el("button", "Send");
      send.type = "submit";
      form.append(label, input, send);
      form.addEventListener("submit", async function (e) {
        e.preventDefault();
        send.disabled = true; errors.textContent = "";
        try {
          await api("POST", "/v1/handoffs/" + h.id + "/messages", { text: input.value });
          input.value = "";
          await showTranscript(box, c.conversation_key, whole.has(h.id));
        } catch (err) { errors.textContent = err.message; }
        send.disabled = false;
      });
      article.appendChild(form);
    }
    article.appendChild(box);
    showTranscript(box, c.conversation_key, whole.has(h.id)).catch(function () { box.textContent = "The transcript could not be loaded."; });
    article.appendChild(memory.panel(c.conversation_key, revealer(box, c.conversation_key), errors));
    return article;
  }

  async function refresh() {
    try {
      var handoffs = await api("GET", "/v1/handoffs");
      list.replaceChildren();
      if (!handoffs.length) list.appendChild(el("p", "Nobody is waiting for a person.", "hq-empty"));
      handoffs.forEach(function (h) { list.appendChild(card(h)); });
    } catch (e) { errors.textContent = e.message; }
  }

  async function signedIn(name) {
    me = name;
    $("hq-me").textContent = "Signed in as " + me;
    list.hidden = false; $("hq-refresh").hidden = false;
    await refresh();
    setInterval(function () {
      // never under the cursor, nor while a deletion waits for its confirmation
      if (!list.querySelector("textarea:focus, .hq-confirm:not([hidden])")) refresh();
    }, REFRESH_MS);
  }

  $("hq-refresh").addEventListener("click", refresh);

  staff.signIn(signedIn);
})();
