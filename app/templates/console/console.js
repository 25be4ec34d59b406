// The console's one script: small enhancements over pages that work without it.
"use strict";
document.addEventListener("DOMContentLoaded", () => {
  // A form marked data-confirm asks before it is sent (deleting, sending).
  for (const form of document.querySelectorAll("form[data-confirm]")) {
    form.addEventListener("submit", (event) => {
      if (!window.confirm(form.dataset.confirm)) event.preventDefault();
    });
  }
  // A "Copy" button beside a secret shown once.
  for (const button of document.querySelectorAll("button[data-copy]")) {
    button.hidden = false;
    button.addEventListener("click", () => {
      const source = document.getElementById(button.dataset.copy);
      if (source && navigator.clipboard) navigator.clipboard.writeText(source.textContent.trim());
    });
  }
  // Fields shown only for one choice of a select (a source's kind, a newsletter's delivery).
  for (const select of document.querySelectorAll("select[data-shows]")) {
    const update = () => {
      for (const part of document.querySelectorAll(`[data-${select.dataset.shows}]`)) {
        part.hidden = part.dataset[select.dataset.shows] !== select.value;
      }
    };
    select.addEventListener("change", update);
    update();
  }
});
