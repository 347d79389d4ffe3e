// A conversation's Memory panel (the queue page's cards): what the bot remembers of each
// person who wrote in it (GET /v1/conversations/{key}/memory), each item with the day it
// was said, when it was last used and a link to the message it was said in; Delete (after
// a confirmation in place) forgets it (DELETE /v1/conversations/{key}/memory/{item}).
(function () {
  "use strict";
  var staff = window.SupportbotStaff, api = staff.api, el = staff.el;  // staff.js

  function day(iso) {
    return new Date(iso).toLocaleDateString([], { day: "numeric", month: "short", year: "numeric" });
  }

  function memoryPath(key) {
    return "/v1/conversations/" + encodeURIComponent(key) + "/memory";
  }

  // Where the item was said: this conversation's message in the transcript (`reveal`
  // shows and returns its line), or another conversation's transcript.
  function source(key, item, reveal) {
    if (item.source_conversation === key && item.recall_id !== null) {
      var here = el("a", "in this chat");
      here.href = "#msg-" + item.recall_id;
      here.addEventListener("click", async function (e) {
        e.preventDefault();
        var line = await reveal(item.recall_id);
        if (!line) return;
        line.classList.add("hq-line-source");
        line.scrollIntoView({ block: "nearest" });
        line.focus();
      });
      return here;
    }
    if (!item.source_conversation) return el("span", "source unknown");
    var there = el("a", "in " + item.source_conversation);
    there.href = "/v1/conversations/" + encodeURIComponent(item.source_conversation);
    there.target = "_blank"; there.rel = "noopener";
    return there;
  }

  function row(key, item, reveal, errors) {
    var li = el("li", null, "hq-item");
    li.dataset.item = item.id;
    li.appendChild(el("span", item.text, "hq-item-text"));
    var meta = el("span", null, "hq-item-meta");
    var said = el("time", "said " + day(item.created_at));
    said.dateTime = item.created_at;
    var used = el("time", "last used " + day(item.last_used_at));
    used.dateTime = item.last_used_at;
    meta.append(said, " · ", used, " · ", source(key, item, reveal));
    li.appendChild(meta);

    var remove = el("button", "Delete", "sb-secondary");
    remove.type = "button";
    remove.setAttribute("aria-label", "Delete “" + item.text + "”");
    var asking = el("span", null, "hq-confirm");
    asking.hidden = true;
    var question = el("span", "Forget this for good?");
    var yes = el("button", "Yes, delete");
    yes.type = "button";
    var no = el("button", "Keep", "sb-secondary");
    no.type = "button";
    asking.append(question, yes, no);
    remove.addEventListener("click", function () { remove.hidden = true; asking.hidden = false; no.focus(); });
    no.addEventListener("click", function () { asking.hidden = true; remove.hidden = false; remove.focus(); });
    yes.addEventListener("click", async function () {
      yes.disabled = no.disabled = true; errors.textContent = "";
      try {
        await api("DELETE", memoryPath(key) + "/" + item.id);
        var list = li.parentNode;
        li.remove();
        if (!list.children.length) list.replaceWith(el("p", "Nothing remembered.", "hq-empty"));
      } catch (e) {
        errors.textContent = e.message;
        yes.disabled = no.disabled = false;
      }
    });
    li.append(remove, asking);
    return li;
  }

  // The panel of conversation `key`; `reveal(recallId)` shows a message in its transcript.
  function panel(key, reveal, errors) {
    var section = el("section", null, "hq-memory");
    section.setAttribute("aria-label", "Memory of the people in " + key);
    section.appendChild(el("h3", "Memory"));
    var body = el("div", "Loading…", "hq-empty");
    section.appendChild(body);
    api("GET", memoryPath(key)).then(function (memory) {
      body.replaceChildren();
      body.className = "";
      if (!memory.people.length) body.appendChild(el("p", "Nobody in this chat is remembered.", "hq-empty"));
      memory.people.forEach(function (person) {
        var group = el("div", null, "hq-person");
        var heading = el("h4");
        heading.append(el("span", person.who, "hq-who"), el("span", person.scope, "hq-scope"));
        group.appendChild(heading);
        if (!person.items.length) group.appendChild(el("p", "Nothing remembered.", "hq-empty"));
        else {
          var ul = el("ul", null, "hq-items");
          person.items.forEach(function (item) { ul.appendChild(row(key, item, reveal, errors)); });
          group.appendChild(ul);
        }
        body.appendChild(group);
      });
    }).catch(function (e) { body.textContent = "The memory could not be loaded: " + e.message; });
    return section;
  }

  window.SupportbotMemory = { panel: panel };
})();
