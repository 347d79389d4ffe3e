// The staff assistant: sign in with a staff token (or behind the company's SSO proxy),
// ask, watch the answer stream in, follow its citations, rate it, go back to earlier chats.
// Answers arrive as Markdown and as HTML the server sanitized (app/api/markdown.py): the
// page inserts that HTML and nothing else; everything else is set as text.
(function () {
  "use strict";
  var TOKEN_KEY = "supportbot.token";
  var CHAT_KEY = "supportbot.conversation";
  var SVG = "http://www.w3.org/2000/svg";
  var $ = function (id) { return document.getElementById(id); };
  var log = $("sb-log"), ask = $("sb-ask"), input = $("sb-input"), send = $("sb-send");
  var chatList = $("sb-history"), chatsButton = $("sb-chats");
  var me = null;

  function headers(extra) {
    var h = Object.assign({ "content-type": "application/json" }, extra || {});
    var token = localStorage.getItem(TOKEN_KEY);
    if (token) h.authorization = "Bearer " + token;
    return h;
  }

  function conversationPath(key) { return "/v1/conversations/" + encodeURIComponent(key); }

  function ownKey(key) { return !!key && key.indexOf(me.conversation_prefix) === 0; }

  // A new chat's key is kept once its first question is sent: until then the server has
  // no such conversation, and loading it would only answer 404.
  var unsent = null;

  function newKey() {
    localStorage.removeItem(CHAT_KEY);
    unsent = me.conversation_prefix + Date.now();
    return unsent;
  }

  function storedKey() {
    var key = localStorage.getItem(CHAT_KEY);
    return ownKey(key) ? key : null;
  }

  function conversationKey() { return storedKey() || (ownKey(unsent) ? unsent : newKey()); }

  function icon(name) {
    var svg = document.createElementNS(SVG, "svg");
    svg.setAttribute("class", "sb-icon");
    svg.setAttribute("aria-hidden", "true");
    svg.setAttribute("focusable", "false");
    var use = document.createElementNS(SVG, "use");
    use.setAttribute("href", "#sb-i-" + name);
    svg.appendChild(use);
    return svg;
  }

  function element(tag, className, text) {
    var node = document.createElement(tag);
    if (className) node.className = className;
    if (text !== undefined) node.textContent = text;
    return node;
  }

  function scrollToEnd() { log.scrollTop = log.scrollHeight; }

  function bubble(role) {
    var div = element("div", "sb-msg " + (role === "user" ? "sb-user" : "sb-bot"));
    div.appendChild(element("div", "sb-text"));
    var welcome = $("sb-welcome");
    if (welcome) welcome.remove();
    log.appendChild(div);
    scrollToEnd();
    return div;
  }

  function userBubble(text) {
    var div = bubble("user");
    div.querySelector(".sb-text").textContent = text;
    return div;
  }

  // `html` is the server's sanitized rendering of the answer's Markdown.
  function showAnswer(div, html) {
    var body = div.querySelector(".sb-text");
    body.classList.remove("sb-streaming");
    body.innerHTML = html;
  }

  function showFailure(div, message) {
    div.classList.add("sb-failed");
    div.setAttribute("role", "alert");
    var body = div.querySelector(".sb-text");
    body.classList.remove("sb-streaming");
    body.textContent = "";
    body.appendChild(icon("alert"));
    body.appendChild(element("span", null, message));
    div.scrollIntoView({ block: "end" });
  }

  function addCitations(div, citations) {
    if (!citations || !citations.length) return;
    var sources = element("div", "sb-sources");
    sources.appendChild(element("p", "sb-sources-label", "Sources"));
    var list = element("ol", "sb-citations");
    list.setAttribute("aria-label", "Sources");
    citations.forEach(function (c) {
      var item = element("li");
      var label = c.heading || c.title;  // the heading path starts with the title
      if (c.url) {
        // The public documentation page.
        var link = element("a", null, label);
        link.href = c.url; link.target = "_blank"; link.rel = "noopener noreferrer";
        link.appendChild(icon("external"));
        item.appendChild(link);
      } else {
        // No public page: the citation opens the passage itself.
        var toggle = element("button", "sb-link", label);
        toggle.type = "button";
        toggle.title = c.source;
        toggle.setAttribute("aria-expanded", "false");
        var passage = element("blockquote", "sb-passage");
        passage.innerHTML = c.excerpt_html;  // sanitized by the server, like an answer
        passage.appendChild(element("span", "sb-passage-source", c.source));
        passage.hidden = true;
        toggle.addEventListener("click", function () {
          passage.hidden = !passage.hidden;
          toggle.setAttribute("aria-expanded", String(!passage.hidden));
        });
        item.appendChild(toggle); item.appendChild(passage);
      }
      list.appendChild(item);
    });
    sources.appendChild(list);
    div.appendChild(sources);
  }

  // While a person from support has the conversation (the reply's `handoff`), say so: a
  // `quiet` turn has no text of its own.
  var HANDOFF_NOTES = {
    open: "Your message is kept for a person from support, who will reply here.",
    claimed: "A person from support has this conversation and will reply here."
  };

  function addHandoff(div, handoff) {
    if (!HANDOFF_NOTES[handoff]) return;
    var note = element("p", "sb-handoff", HANDOFF_NOTES[handoff]);
    note.setAttribute("role", "status");
    div.appendChild(note);
  }

  function addFeedback(div, key, turn, stored) {
    var bar = element("div", "sb-feedback");
    var status = element("span", "sb-status");
    status.setAttribute("role", "status");
    var buttons = {};
    var form = element("form", "sb-comment");
    form.hidden = true;
    var commentId = "sb-comment-" + turn + "-" + Date.now();
    var label = element("label", null, "What was wrong? (optional)");
    label.htmlFor = commentId;
    var comment = element("textarea");
    comment.id = commentId; comment.rows = 2; comment.maxLength = 2000;
    var actions = element("div", "sb-comment-actions");
    var submit = element("button", null, "Send feedback");
    submit.type = "submit";
    var cancel = element("button", "sb-secondary", "Cancel");
    cancel.type = "button";
    actions.appendChild(submit); actions.appendChild(cancel);
    form.appendChild(label); form.appendChild(comment); form.appendChild(actions);

    function mark(rating, text) {
      Object.keys(buttons).forEach(function (r) { buttons[r].setAttribute("aria-pressed", String(r === rating)); });
      status.textContent = text;
    }

    function rate(rating, text) {
      return fetch(conversationPath(key) + "/turns/" + turn + "/feedback", {
        method: "POST", headers: headers(),
        body: JSON.stringify({ rating: rating, comment: text || null })
      }).then(function (r) {
        if (!r.ok) throw new Error("HTTP " + r.status);
        mark(rating, "Thanks for the feedback");
      }).catch(function () { status.textContent = "Feedback not saved, please try again"; });
    }

    [["up", "Helpful"], ["down", "Not helpful"]].forEach(function (choice) {
      var b = element("button", "sb-rate");
      b.type = "button";
      b.dataset.rating = choice[0];
      b.setAttribute("aria-pressed", "false");
      b.appendChild(icon(choice[0]));
      b.appendChild(element("span", null, choice[1]));
      b.addEventListener("click", function () {
        if (choice[0] === "up") { form.hidden = true; rate("up"); return; }
        form.hidden = false;
        comment.focus();
      });
      buttons[choice[0]] = b;
      bar.appendChild(b);
    });
    form.addEventListener("submit", function (e) {
      e.preventDefault();
      rate("down", comment.value.trim()).then(function () { form.hidden = true; });
    });
    cancel.addEventListener("click", function () { form.hidden = true; buttons.down.focus(); });
    bar.appendChild(status);
    if (stored) {
      mark(stored.rating, stored.rating === "up" ? "You found this helpful" : "You found this not helpful");
      if (stored.comment) comment.value = stored.comment;
    }
    div.appendChild(bar);
    div.appendChild(form);
  }

  // Server-sent events over a POST body: parse "event:"/"data:" blocks from the stream.
  // A refusal (4xx before the stream starts) and an `error` event both reject.
  async function streamTurn(key, text, onEvent) {
    var response = await fetch(conversationPath(key) + "/messages/stream", {
      method: "POST", headers: headers({ accept: "text/event-stream" }),
      body: JSON.stringify({ audience: "staff", author: me.name, text: text })
    });
    if (!response.ok) {
      var problem = await response.json().catch(function () { return {}; });
      var refused = new Error(problem.detail || "HTTP " + response.status);
      refused.refused = true;
      throw refused;
    }
    var reader = response.body.getReader(), decoder = new TextDecoder(), buffer = "";
    for (;;) {
      var chunk = await reader.read();
      if (chunk.done) break;
      buffer += decoder.decode(chunk.value, { stream: true });
      var blocks = buffer.split("\n\n");
      buffer = blocks.pop();
      blocks.forEach(function (block) {
        var event = "message", data = "";
        block.split("\n").forEach(function (line) {
          if (line.indexOf("event:") === 0) event = line.slice(6).trim();
          else if (line.indexOf("data:") === 0) data += line.slice(5).trim();
        });
        if (data) onEvent(event, JSON.parse(data));
      });
    }
  }

  async function submitQuestion(text) {
    var key = conversationKey();
    localStorage.setItem(CHAT_KEY, key);
    input.value = ""; send.disabled = true;
    userBubble(text);
    var answer = bubble("bot"), body = answer.querySelector(".sb-text");
    body.classList.add("sb-streaming");
    answer.setAttribute("aria-busy", "true");
    var finished = false;
    try {
      await streamTurn(key, text, function (event, data) {
        if (event === "token") { body.textContent += data.text; scrollToEnd(); }
        else if (event === "done") {
          finished = true;
          showAnswer(answer, data.html);
          addCitations(answer, data.citations);
          addHandoff(answer, data.handoff);
          addFeedback(answer, key, data.turn, null);
          scrollToEnd();
        } else if (event === "error") { throw new Error(data.detail); }
      });
      if (!finished) throw new Error("the connection closed before the answer was complete");
    } catch (err) {
      if (err.refused) {
        // Nothing was stored: give the question back to edit or send again.
        showFailure(answer, "Not sent: " + err.message);
        input.value = text;
      } else {
        showFailure(answer, "Sorry, no answer this time: " + err.message);
      }
    } finally {
      answer.removeAttribute("aria-busy"); send.disabled = false; input.focus();
    }
  }

  function onAsk(e) {
    e.preventDefault();
    var text = input.value.trim();
    if (text) submitQuestion(text);
  }

  function showWelcome() {
    var welcome = element("div", "sb-welcome");
    welcome.id = "sb-welcome";
    welcome.appendChild(element("p", "sb-welcome-hello", "Hello" + (me.name ? ", " + me.name : "") + "!"));
    welcome.appendChild(element("p", null,
      "Ask how to do something in the product: I answer from the documentation and list the pages I used."));
    if (me.example_questions && me.example_questions.length) {
      welcome.appendChild(element("p", "sb-muted", "For example:"));
      var list = element("ul", "sb-examples");
      me.example_questions.forEach(function (question) {
        var item = element("li");
        var b = element("button", "sb-example", question);
        b.type = "button";
        b.addEventListener("click", function () { submitQuestion(question); });
        item.appendChild(b); list.appendChild(item);
      });
      welcome.appendChild(list);
    }
    log.appendChild(welcome);
  }

  async function restore() {
    log.textContent = "";
    var key = storedKey(), messages = [];
    if (key) {
      var r = await fetch(conversationPath(key), { headers: headers() });
      if (r.ok) messages = (await r.json()).messages;
    }
    var shown = 0;
    messages.forEach(function (m) {
      if (m.role === "user") { userBubble(m.content); shown++; }
      else if (m.role === "assistant" && !m.tool_calls) {
        var div = bubble("bot");
        showAnswer(div, m.html);
        addCitations(div, m.citations);
        addFeedback(div, key, m.turn, m.feedback);
        shown++;
      }
    });
    if (!shown) showWelcome();
    scrollToEnd();
  }

  function closeHistory() {
    chatList.hidden = true; log.hidden = false; ask.hidden = false;
    chatsButton.setAttribute("aria-expanded", "false");
  }

  function when(iso) {
    var date = new Date(iso);
    var today = new Date().toDateString() === date.toDateString();
    return today ? date.toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" })
      : date.toLocaleDateString([], { day: "numeric", month: "short", year: "numeric" });
  }

  async function openHistory() {
    var list = $("sb-history-list");
    list.textContent = "";
    chatList.hidden = false; log.hidden = true; ask.hidden = true;
    chatsButton.setAttribute("aria-expanded", "true");
    var r = await fetch("/v1/widget/conversations", { headers: headers() });
    var chats = r.ok ? (await r.json()).conversations : [];
    $("sb-history-empty").hidden = chats.length > 0;
    var current = localStorage.getItem(CHAT_KEY);
    chats.forEach(function (chat) {
      var item = element("li");
      var b = element("button", "sb-chat");
      b.type = "button";
      if (chat.key === current) b.setAttribute("aria-current", "true");
      b.appendChild(element("span", "sb-chat-title", chat.title));
      var time = element("time", "sb-chat-when", when(chat.last_activity));
      time.dateTime = chat.last_activity;
      b.appendChild(time);
      b.addEventListener("click", function () {
        localStorage.setItem(CHAT_KEY, chat.key);
        closeHistory();
        restore().then(function () { input.focus(); });
      });
      item.appendChild(b); list.appendChild(item);
    });
    (list.querySelector("button") || chatsButton).focus();
  }

  function showChat() {
    $("sb-login").hidden = true;
    $("sb-who").textContent = "Signed in as " + me.name;
    $("sb-account").hidden = false;
    // Behind the SSO proxy there is no token to forget: the proxy signs people out.
    $("sb-signout").hidden = !localStorage.getItem(TOKEN_KEY);
    $("sb-tools").hidden = false;
    closeHistory();
    restore().then(function () { input.focus(); });
  }

  function showLogin() {
    me = null;
    log.textContent = "";
    [log, ask, chatList, $("sb-tools"), $("sb-account")].forEach(function (node) { node.hidden = true; });
    $("sb-login").hidden = false;
    $("sb-token").value = "";
    $("sb-token").focus();
  }

  async function signIn() {
    var r = await fetch("/v1/widget/me", { headers: headers() });
    if (!r.ok) return false;
    me = await r.json();
    return true;
  }

  $("sb-login").addEventListener("submit", async function (e) {
    e.preventDefault();
    localStorage.setItem(TOKEN_KEY, $("sb-token").value.trim());
    if (await signIn()) { $("sb-login-error").textContent = ""; showChat(); }
    else { localStorage.removeItem(TOKEN_KEY); $("sb-login-error").textContent = "That token was not accepted."; }
  });
  $("sb-signout").addEventListener("click", function () {
    localStorage.removeItem(TOKEN_KEY);
    localStorage.removeItem(CHAT_KEY);
    showLogin();
  });
  $("sb-new").addEventListener("click", function () {
    newKey();  // the chat so far stays on the server and in the list of chats
    closeHistory();
    log.textContent = "";
    showWelcome();
    input.focus();
  });
  chatsButton.addEventListener("click", function () {
    if (chatList.hidden) openHistory();
    else { closeHistory(); input.focus(); }
  });
  ask.addEventListener("submit", onAsk);
  input.addEventListener("keydown", function (e) {
    if (e.key === "Enter" && !e.shiftKey) { e.preventDefault(); ask.requestSubmit(); }
  });

  // The link `supportbot serve` prints on a machine with no staff credentials configured
  // (/widget#sign-in=<token>): its token is kept like a typed-in one, then taken out of the
  // address bar. A link of an earlier start of the server no longer signs in.
  var linkToken = /^#sign-in=([\w-]+)$/.exec(location.hash);
  if (linkToken) {
    localStorage.setItem(TOKEN_KEY, linkToken[1]);
    history.replaceState(null, "", location.pathname + location.search);
  }
  signIn().then(function (ok) {
    if (ok) { showChat(); return; }
    if (linkToken) localStorage.removeItem(TOKEN_KEY);
    showLogin();
    if (linkToken) $("sb-login-error").textContent = "That sign-in link is from an earlier start of the server: use the one it printed last.";
  });
})();
