// The staff assistant: sign in with a staff token (or behind the company's SSO proxy),
// ask, watch the answer stream in, follow its citations, rate it.
(function () {
  "use strict";
  var TOKEN_KEY = "supportbot.token";
  var CHAT_KEY = "supportbot.conversation";
  var $ = function (id) { return document.getElementById(id); };
  var log = $("sb-log"), ask = $("sb-ask"), input = $("sb-input"), send = $("sb-send");
  var me = null;

  function headers(extra) {
    var h = Object.assign({ "content-type": "application/json" }, extra || {});
    var token = localStorage.getItem(TOKEN_KEY);
    if (token) h.authorization = "Bearer " + token;
    return h;
  }

  function conversationKey() {
    var key = localStorage.getItem(CHAT_KEY);
    if (!key || key.indexOf("widget:" + me.name + ":") !== 0) {
      key = "widget:" + me.name + ":" + Date.now();
      localStorage.setItem(CHAT_KEY, key);
    }
    return key;
  }

  function bubble(role, text) {
    var div = document.createElement("div");
    div.className = "sb-msg " + (role === "user" ? "sb-user" : "sb-bot");
    var body = document.createElement("div");
    body.className = "sb-text";
    body.textContent = text;
    div.appendChild(body);
    log.appendChild(div);
    log.scrollTop = log.scrollHeight;
    return div;
  }

  function isUrl(source) { return /^https?:\/\//.test(source); }

  function addCitations(div, citations) {
    if (!citations || !citations.length) return;
    var list = document.createElement("ol");
    list.className = "sb-citations";
    list.setAttribute("aria-label", "Sources");
    citations.forEach(function (c) {
      var item = document.createElement("li");
      var link = document.createElement("a");
      link.textContent = c.heading || c.title;  // the heading path starts with the title
      if (isUrl(c.source)) {
        link.href = c.source; link.target = "_blank"; link.rel = "noopener";
      } else {
        // A path inside the knowledge base: the link opens the passage itself.
        link.href = "#";
        link.title = c.source;
        var passage = document.createElement("div");
        passage.className = "sb-passage"; passage.hidden = true;
        passage.textContent = c.excerpt + " (" + c.source + ")";
        link.setAttribute("aria-expanded", "false");
        link.addEventListener("click", function (e) {
          e.preventDefault();
          passage.hidden = !passage.hidden;
          link.setAttribute("aria-expanded", String(!passage.hidden));
        });
        item.appendChild(link); item.appendChild(passage); list.appendChild(item);
        return;
      }
      item.appendChild(link); list.appendChild(item);
    });
    div.appendChild(list);
  }

  function addFeedback(div, key, turn) {
    var bar = document.createElement("div");
    bar.className = "sb-feedback";
    var status = document.createElement("span");
    status.setAttribute("role", "status");
    [["up", "👍 Helpful"], ["down", "👎 Not helpful"]].forEach(function (choice) {
      var b = document.createElement("button");
      b.type = "button"; b.textContent = choice[1];
      b.setAttribute("aria-pressed", "false");
      b.dataset.rating = choice[0];
      b.addEventListener("click", function () {
        var comment = choice[0] === "down" ? (window.prompt("What was wrong? (optional)") || "") : "";
        fetch("/v1/conversations/" + encodeURIComponent(key) + "/turns/" + turn + "/feedback", {
          method: "POST", headers: headers(),
          body: JSON.stringify({ rating: choice[0], comment: comment || null })
        }).then(function (r) {
          if (!r.ok) throw new Error("HTTP " + r.status);
          bar.querySelectorAll("button").forEach(function (x) { x.setAttribute("aria-pressed", String(x === b)); });
          status.textContent = "Thanks for the feedback";
        }).catch(function () { status.textContent = "Feedback not saved"; });
      });
      bar.appendChild(b);
    });
    bar.appendChild(status);
    div.appendChild(bar);
  }

  // Server-sent events over a POST body: parse "event:"/"data:" blocks from the stream.
  async function streamTurn(key, text, onEvent) {
    var response = await fetch("/v1/conversations/" + encodeURIComponent(key) + "/messages/stream", {
      method: "POST", headers: headers({ accept: "text/event-stream" }),
      body: JSON.stringify({ audience: "staff", author: me.name, text: text })
    });
    if (!response.ok) {
      var problem = await response.json().catch(function () { return {}; });
      throw new Error(problem.detail || "HTTP " + response.status);
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

  async function onAsk(e) {
    e.preventDefault();
    var text = input.value.trim();
    if (!text) return;
    var key = conversationKey();
    input.value = ""; send.disabled = true;
    bubble("user", text);
    var answer = bubble("bot", ""), body = answer.querySelector(".sb-text");
    answer.setAttribute("aria-busy", "true");
    try {
      await streamTurn(key, text, function (event, data) {
        if (event === "token") { body.textContent += data.text; log.scrollTop = log.scrollHeight; }
        else if (event === "done") {
          body.textContent = data.text;
          addCitations(answer, data.citations);
          addFeedback(answer, key, data.turn);
        } else if (event === "error") { throw new Error(data.detail); }
      });
    } catch (err) {
      answer.classList.add("sb-failed");
      body.textContent = "Sorry, no answer this time: " + err.message;
    } finally {
      answer.removeAttribute("aria-busy"); send.disabled = false; input.focus();
    }
  }

  async function restore() {
    var key = conversationKey();
    var r = await fetch("/v1/conversations/" + encodeURIComponent(key), { headers: headers() });
    if (!r.ok) return;
    var conversation = await r.json();
    conversation.messages.forEach(function (m) {
      if (m.role === "user") bubble("user", m.content);
      else if (m.role === "assistant" && !m.tool_calls) {
        var div = bubble("bot", m.content);
        addCitations(div, m.citations);
        addFeedback(div, key, m.turn);
      }
    });
  }

  function showChat() {
    $("sb-login").hidden = true;
    log.hidden = false; ask.hidden = false; $("sb-new").hidden = false;
    restore().then(function () { input.focus(); });
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
    if (await signIn()) showChat();
    else { localStorage.removeItem(TOKEN_KEY); $("sb-login-error").textContent = "That token was not accepted."; }
  });
  $("sb-new").addEventListener("click", function () {
    localStorage.removeItem(CHAT_KEY);
    log.textContent = "";
    input.focus();
  });
  ask.addEventListener("submit", onAsk);
  input.addEventListener("keydown", function (e) {
    if (e.key === "Enter" && !e.shiftKey) { e.preventDefault(); ask.requestSubmit(); }
  });

  signIn().then(function (ok) {
    if (ok) showChat();
    else { $("sb-login").hidden = false; $("sb-token").focus(); }
  });
})();
