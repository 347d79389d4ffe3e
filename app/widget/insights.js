// The Insights page: what turns came to and what the bot did not answer. Figures and
// charts from GET /v1/insights/outcomes, the gap report from GET /v1/insights/gaps; the
// charts are inline SVG drawn here (nothing loaded from elsewhere). Staff only.
(function () {
  "use strict";
  var staff = window.SupportbotStaff, el = staff.el;  // staff.js
  var SVG = "http://www.w3.org/2000/svg";
  var PAGE = 10;  // topics per request
  var OUTCOMES = [  // drawing order, bottom up, and colours
    ["answered", "#2e8b57"], ["expert", "#7fb77e"], ["bot_back", "#9ecae1"],
    ["quiet", "#c6c6c6"], ["not_found", "#e6a23c"], ["handed_off", "#2456c7"],
    ["unresolved", "#d46a6a"], ["rated_down", "#b3261e"], ["failed", "#5b6270"]
  ];
  var $ = function (id) { return document.getElementById(id); };
  var errors = $("in-error");
  var offset = 0;

  function api(path) { return staff.api("GET", path); }

  function svg(tag, attributes, text) {
    var node = document.createElementNS(SVG, tag);
    Object.keys(attributes).forEach(function (name) { node.setAttribute(name, attributes[name]); });
    if (text !== undefined) node.textContent = text;
    return node;
  }

  function percent(share) { return share === null ? "–" : Math.round(share * 100) + "%"; }

  // Stacked bars of the outcomes per day, the resolution rate as a line over them.
  function drawMix(days) {
    var box = $("in-mix"), width = 720, height = 240, left = 36, bottom = 22, top = 10;
    box.replaceChildren();
    if (!days.length) { box.appendChild(el("p", "No turns in this period.", "in-muted")); return; }
    var chart = svg("svg", { viewBox: "0 0 " + width + " " + height, role: "img",
      "aria-label": "Outcomes per day and resolution rate" });
    var most = Math.max.apply(null, days.map(function (d) {
      return Object.values(d.outcomes).reduce(function (a, b) { return a + b; }, 0);
    }));
    var plotH = height - top - bottom, step = (width - left - 36) / days.length;
    var barW = Math.max(4, Math.min(48, step * 0.6));
    chart.appendChild(svg("text", { x: 2, y: top + 8 }, String(most)));
    chart.appendChild(svg("text", { x: 2, y: top + plotH }, "0"));
    chart.appendChild(svg("text", { x: width - 32, y: top + 8 }, "100%"));
    chart.appendChild(svg("line", { x1: left, y1: top + plotH, x2: width - 36, y2: top + plotH, stroke: "#d5d9e0" }));
    var points = [];
    days.forEach(function (day, i) {
      var x = left + i * step + (step - barW) / 2, y = top + plotH;
      OUTCOMES.forEach(function (pair) {
        var n = day.outcomes[pair[0]] || 0;
        if (!n) return;
        var h = plotH * n / most;
        y -= h;
        var bar = svg("rect", { x: x, y: y, width: barW, height: h, fill: pair[1] });
        bar.appendChild(svg("title", {}, day.day + ": " + n + " " + pair[0]));
        chart.appendChild(bar);
      });
      if (days.length <= 16 || i % Math.ceil(days.length / 16) === 0) {
        chart.appendChild(svg("text", { x: x, y: height - 6 }, day.day.slice(5)));
      }
      if (day.resolution_rate !== null) {
        points.push([x + barW / 2, top + plotH * (1 - day.resolution_rate), day]);
      }
    });
    if (points.length) {
      chart.appendChild(svg("polyline", { points: points.map(function (p) { return p[0] + "," + p[1]; }).join(" "),
        fill: "none", stroke: "#1d2129", "stroke-width": 2 }));
      points.forEach(function (p) {
        var dot = svg("circle", { cx: p[0], cy: p[1], r: 3.5, fill: "#1d2129" });
        dot.appendChild(svg("title", {}, p[2].day + ": resolution rate " + percent(p[2].resolution_rate)));
        chart.appendChild(dot);
      });
    }
    box.appendChild(chart);
    var legend = $("in-legend");
    legend.replaceChildren();
    OUTCOMES.forEach(function (pair) {
      var item = el("li", pair[0].replace("_", " "));
      var swatch = el("span", null, "in-swatch");
      swatch.style.background = pair[1];
      item.prepend(swatch);
      legend.appendChild(item);
    });
    var line = el("li", "resolution rate (line, right axis)");
    var mark = el("span", null, "in-swatch");
    mark.style.background = "#1d2129";
    line.prepend(mark);
    legend.appendChild(line);
  }

  // One horizontal bar per memory profile.
  function drawCache(rates) {
    var box = $("in-cache"), profiles = Object.keys(rates).sort();
    box.replaceChildren();
    if (!profiles.length) { box.appendChild(el("p", "No LLM calls in this period.", "in-muted")); return; }
    var width = 720, row = 26, left = 90;
    var chart = svg("svg", { viewBox: "0 0 " + width + " " + (profiles.length * row + 6), role: "img",
      "aria-label": "Prompt-cache hit rate per memory profile" });
    profiles.forEach(function (profile, i) {
      var y = i * row + 4, w = (width - left - 50) * rates[profile];
      chart.appendChild(svg("text", { x: 0, y: y + 14 }, profile));
      chart.appendChild(svg("rect", { x: left, y: y, width: width - left - 50, height: 18, fill: "#e8eefb" }));
      chart.appendChild(svg("rect", { x: left, y: y, width: w, height: 18, fill: "#2456c7" }));
      chart.appendChild(svg("text", { x: left + w + 6, y: y + 14 }, percent(rates[profile])));
    });
    box.appendChild(chart);
  }

  function showFigures(o) {
    $("in-resolution").textContent = percent(o.resolution_rate);
    $("in-resolution-of").textContent = o.resolved + " of " + o.conversations + " conversations answered without a person, a thumbs-down, a follow-up saying it failed or a failure";
    $("in-cost").textContent = o.cost_per_resolved_usd === null ? "–" : "$" + o.cost_per_resolved_usd.toFixed(4);
    $("in-cost-of").textContent = o.cost_simulated
      ? "$" + o.cost_usd.toFixed(4) + " simulated: the offline model, priced as the model it stands in for; nothing was billed"
      : "$" + o.cost_usd.toFixed(4) + " spent on LLM calls in all" +
        (o.simulated_cost_usd > 0 ? ", $" + o.simulated_cost_usd.toFixed(4) + " of it simulated (offline model)" : "");
    if (o.cost_simulated) $("in-cost").textContent += " (simulated)";
    var reasons = Object.keys(o.handoffs_by_reason);
    var total = reasons.reduce(function (a, r) { return a + o.handoffs_by_reason[r]; }, 0);
    $("in-handoffs").textContent = String(total);
    $("in-handoffs-of").textContent = reasons.length
      ? reasons.map(function (r) { return r.replace("_", " ") + " " + o.handoffs_by_reason[r]; }).join(", ")
      : "no conversation handed to a person";
  }

  // The question's turn from its transcript: what was asked and what the bot said.
  async function showTranscript(box, q) {
    var conversation = await api(q.transcript);
    box.replaceChildren();
    conversation.messages
      .filter(function (m) { return m.turn === q.turn && (m.role === "user" || m.role === "staff" || (m.role === "assistant" && !m.tool_calls)); })
      .forEach(function (m) {
        box.appendChild(el("p", (m.role === "assistant" ? "bot" : (m.author || m.role)) + ": " + m.content));
      });
    var whole = el("a", "Whole transcript (turn " + q.turn + " of " + q.conversation_key + ")");
    whole.href = q.transcript;
    whole.target = "_blank"; whole.rel = "noopener";
    box.appendChild(whole);
  }

  function example(q) {
    var item = el("li");
    var open = el("button", q.question, "sb-link");
    open.type = "button";
    open.setAttribute("aria-expanded", "false");
    var box = el("div", null, "in-transcript");
    box.hidden = true;
    open.addEventListener("click", async function () {
      var showing = open.getAttribute("aria-expanded") === "true";
      open.setAttribute("aria-expanded", String(!showing));
      box.hidden = showing;
      if (!showing && !box.childElementCount) {
        try { await showTranscript(box, q); } catch (e) { box.textContent = e.message; }
      }
    });
    var why = q.handoff_reason || q.failed_by;  // a handoff's reason; how a follow-up said the answer failed
    var outcome = q.outcome.replace("_", " ") + (why ? ": " + why.replace("_", " ") : "");
    item.append(open, el("span", " (" + outcome + ", " + q.conversation_key + ")", "in-muted"));
    if (q.comment) item.appendChild(el("q", q.comment, "in-comment"));
    item.appendChild(box);
    return item;
  }

  function field(dl, name, value) {
    dl.appendChild(el("dt", name));
    var dd = el("dd");
    if (typeof value === "string") dd.textContent = value; else dd.appendChild(value);
    dl.appendChild(dd);
  }

  function gap(group, largest) {
    var item = el("li", null, "in-gap");
    var title = el("h3");
    title.append(el("span", String(group.count), "in-count"), el("span", group.name));
    var trend = el("span", (group.trend > 0 ? "+" : "") + group.trend + " vs the period before", "in-trend in-muted");
    trend.dataset.up = String(group.trend > 0);
    title.appendChild(trend);
    var bar = el("div", null, "in-bar");
    bar.style.width = Math.max(2, 100 * group.count / largest) + "%";
    var dl = el("dl");
    field(dl, "Words", group.words.join(", ") || "–");
    field(dl, "Outcomes", Object.keys(group.outcomes).map(function (o) { return o.replace("_", " ") + " " + group.outcomes[o]; }).join(", "));
    var pages = el("ul");
    group.pages.forEach(function (p) { pages.appendChild(el("li", p.title + " (" + p.source + ", " + p.similarity.toFixed(2) + ")")); });
    field(dl, "Closest pages", group.pages.length ? pages : "none: the documentation has no page on this");
    field(dl, "Cost", "$" + group.cost_usd.toFixed(4) + (group.cost_simulated ? " simulated (offline model, nothing billed)" : ""));
    var examples = el("ul");
    group.examples.forEach(function (q) { examples.appendChild(example(q)); });
    field(dl, "Questions", examples);
    item.append(title, bar, dl);
    if (window.SupportbotAnswers) window.SupportbotAnswers.writeFor(group, item);  // answers.js
    return item;
  }

  var largest = 1;

  async function showGaps(since, more) {
    var report = await api("/v1/insights/gaps?since=" + since + "&limit=" + PAGE + "&offset=" + offset);
    if (!more) {
      $("in-gaps").replaceChildren();
      largest = report.groups.length ? report.groups[0].count : 1;
      $("in-gaps-summary").textContent = report.questions
        ? report.questions + " questions on " + report.total_groups + " topics, the most asked first"
        : "Every question in this period was answered from the documentation.";
    }
    report.groups.forEach(function (g) { $("in-gaps").appendChild(gap(g, largest)); });
    offset += report.groups.length;
    $("in-more").hidden = offset >= report.total_groups;
  }

  async function refresh() {
    var since = $("in-since").value;
    errors.textContent = "";
    try {
      var outcomes = await api("/v1/insights/outcomes?since=" + since);
      showFigures(outcomes);
      drawMix(outcomes.days);
      drawCache(outcomes.cache_hit_rate_by_profile);
      offset = 0;
      await showGaps(since, false);
    } catch (e) { errors.textContent = e.message; }
  }

  async function signedIn(name) {
    $("in-me").textContent = "Signed in as " + name;
    $("in-body").hidden = false;
    document.querySelector(".in-period").hidden = false;
    await refresh();
  }

  $("in-since").addEventListener("change", refresh);
  $("in-more").addEventListener("click", function () {
    showGaps($("in-since").value, true).catch(function (e) { errors.textContent = e.message; });
  });

  staff.signIn(signedIn);
})();
