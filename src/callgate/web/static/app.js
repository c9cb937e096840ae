// Keyboard shortcuts for the labelling page. The pages work without this file: it only turns
// key presses into the same form submissions and links a person can use by hand.
(function () {
  "use strict";
  var form = document.getElementById("label-form");
  var tokenField = document.getElementById("token");
  if (tokenField) {
    tokenField.value = sessionStorage.getItem("callgate-token") || "";
    tokenField.addEventListener("change", function () { sessionStorage.setItem("callgate-token", tokenField.value); });
  }
  document.querySelectorAll(".token-copy").forEach(function (el) { el.value = sessionStorage.getItem("callgate-token") || ""; });
  // Arguments cannot pass when the tool choice fails: the review page's dropdowns say so and
  // move the arguments to n/a, rather than send a label the server refuses.
  document.querySelectorAll("form.relabel").forEach(function (relabel) {
    var tool = relabel.querySelector('select[name="tool_choice"]');
    var args = relabel.querySelector('select[name="arguments"]');
    var why = relabel.querySelector(".why");
    function agree() {
      var fails = tool.value === "fail";
      args.querySelector('option[value="pass"]').disabled = fails;
      if (fails && args.value === "pass") {
        args.value = "n/a";
        if (why) { why.textContent = "arguments set to n/a: they cannot pass when the tool choice fails"; why.hidden = false; }
      }
    }
    tool.addEventListener("change", agree);
    agree();
  });
  if (!form) return;
  var labeller = document.getElementById("labeller");
  var known = localStorage.getItem("callgate-labeller") || "";
  var here = new URL(window.location.href);
  if (!labeller.value && known && !here.searchParams.get("labeller")) {
    // the queue is this person's: open it at their next item, with their labels hidden or not
    here.searchParams.set("labeller", known);
    window.location.replace(here.toString());
    return;
  }
  if (!labeller.value) labeller.value = known;
  var refusal = document.getElementById("key-refused");
  var toolInputs = form.querySelectorAll('input[name="tool_choice"]');
  var argumentPass = form.querySelector('input[name="arguments"][value="pass"]');
  function toolFails() {
    var chosen = form.querySelector('input[name="tool_choice"]:checked');
    return chosen !== null && chosen.value === "fail";
  }
  function refuse(text) { refusal.textContent = text; refusal.hidden = false; }
  function sync() {
    // with the mouse too: a failed tool choice leaves the arguments fail or n/a
    argumentPass.disabled = toolFails();
    if (argumentPass.disabled && argumentPass.checked) argumentPass.checked = false;
  }
  toolInputs.forEach(function (el) { el.addEventListener("change", sync); });
  labeller.addEventListener("change", function () { localStorage.setItem("callgate-labeller", labeller.value.trim()); });
  var dims = Array.prototype.slice.call(form.querySelectorAll("fieldset.dim"));
  var active = 0;
  function show() { dims.forEach(function (d, i) { d.classList.toggle("active", i === active); }); }
  function choose(value) {
    var input = dims[active].querySelector('input[value="' + value + '"]');
    if (!input) return;
    if (dims[active].getAttribute("data-dim") === "arguments" && value === "pass" && toolFails()) {
      refuse("Not saved: arguments cannot pass when the tool choice fails. Press f (fail) or n (n/a) for the arguments.");
      return;
    }
    refusal.hidden = true;
    input.checked = true;
    sync();
    if (active + 1 < dims.length) { active += 1; show(); return; }
    if (!labeller.value.trim()) { labeller.focus(); return; }
    localStorage.setItem("callgate-labeller", labeller.value.trim());
    form.submit();
  }
  function go(id) {
    var link = document.getElementById(id);
    if (!link) return;
    var url = new URL(link.href);
    if (labeller.value.trim()) url.searchParams.set("labeller", labeller.value.trim());
    window.location.href = url.toString();
  }
  document.addEventListener("keydown", function (event) {
    var tag = (event.target.tagName || "").toLowerCase();
    if (tag === "input" && event.target.type !== "radio" || tag === "textarea" || tag === "select") return;
    if (event.ctrlKey || event.metaKey || event.altKey) return;
    var key = event.key;
    if (key === "p") choose("pass");
    else if (key === "f") choose("fail");
    else if (key === "n") choose("n/a");
    else if (key === "j") go("next");
    else if (key === "k") go("prev");
    else if (key === "u") {
      var undo = document.getElementById("undo-form");
      if (!undo) return;
      undo.querySelector('input[name="labeller"]').value = labeller.value.trim();
      undo.submit();
    } else return;
    event.preventDefault();
  });
  show();
  sync();  // a label given before (shown to its labeller) may already fail the tool choice
  document.body.setAttribute("data-keys", "ready");  // the shortcuts are listening
})();
