// Embed the staff assistant in any internal page with one tag:
//   <script src="https://support-bot.internal/widget/embed.js" async></script>
// It adds a launcher button that opens the widget (served by the bot) in a side panel.
(function () {
  var origin = new URL(document.currentScript.src).origin;
  var frame = null;
  var button = document.createElement("button");
  button.type = "button";
  button.textContent = "Support assistant";
  button.setAttribute("aria-expanded", "false");
  button.style.cssText = "position:fixed;right:1rem;bottom:1rem;z-index:2147483646;padding:.6rem 1rem;" +
    "border:0;border-radius:2rem;background:#2456c7;color:#fff;font:inherit;cursor:pointer";
  button.addEventListener("click", function () {
    if (!frame) {
      frame = document.createElement("iframe");
      frame.src = origin + "/widget";
      frame.title = "Support assistant";
      frame.style.cssText = "position:fixed;right:1rem;bottom:4rem;z-index:2147483647;border:1px solid #d5d9e0;" +
        "border-radius:.8rem;width:min(26rem,calc(100vw - 2rem));height:min(40rem,calc(100vh - 6rem));background:#fff";
      document.body.appendChild(frame);
    } else {
      frame.hidden = !frame.hidden;
    }
    button.setAttribute("aria-expanded", String(!frame.hidden));
  });
  document.body.appendChild(button);
})();
