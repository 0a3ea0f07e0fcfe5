/* Keyboard focus after htmx swaps on the staff pages.
 *
 * A swap replaces the element that had focus (the form's button), so focus
 * would drop to <body>. Write responses name the element to focus in
 * HX-Trigger-After-Settle (event "staff-focus", {"id": ...}): the record
 * saved, or its region's heading when the record is gone. Focus goes to the
 * first invalid field or error inside it when there is one, else to the
 * element itself (made focusable with tabindex="-1").
 */
(function () {
  "use strict";
  var FOCUSABLE = "a[href], button, input, select, textarea, summary, [tabindex]";
  document.addEventListener("staff-focus", function (event) {
    var box = event.detail && document.getElementById(event.detail.id);
    if (!box) return;
    var spot = box.querySelector('[aria-invalid="true"], .errors, .errorlist') || box;
    if (!spot.matches(FOCUSABLE)) spot.setAttribute("tabindex", "-1");
    spot.focus();
  });
})();

/* "Cancel" in a delete confirmation that htmx placed in the page closes it
 * (without JavaScript the link leads back to the record's page). A listener
 * here rather than an inline handler: the Content-Security-Policy forbids
 * inline script and eval. */
(function () {
  "use strict";
  document.addEventListener("click", function (event) {
    var link = event.target.closest && event.target.closest(".confirm a.cancel");
    var box = link && link.closest(".confirm");
    if (!box) return;
    event.preventDefault();
    box.remove();
  });
})();
