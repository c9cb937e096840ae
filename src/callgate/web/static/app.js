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
  if (!form) return;
  var labeller = document.getElementById("labeller");
  if (!labeller.value) labeller.value = localStorage.getItem("callgate-labeller") || "";
  labeller.addEventListener("change", function () { localStorage.setItem("callgate-labeller", labeller.value.trim()); });
  var dims = Array.prototype.slice.call(form.querySelectorAll("fieldset.dim"));
  var active = 0;
  function show() { dims.forEach(function (d, i) { d.classList.toggle("active", i === active); }); }
  function choose(value) {
    var input = dims[active].querySelector('input[value="' + value + '"]');
    if (!input) return;
    input.checked = true;
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
      undo.querySelector('input[name="labeller"]').value = labeller.value.trim();
      undo.submit();
    } else return;
    event.preventDefault();
  });
  show();
  document.body.setAttribute("data-keys", "ready");  // the shortcuts are listening
})();
