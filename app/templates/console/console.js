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
  // A form with data-live-preview refreshes that region as you type: the page's own Preview button's
  // answer, fetched in the background, and only its region swapped in.
  for (const form of document.querySelectorAll("form[data-live-preview]")) {
    const region = document.getElementById(form.dataset.livePreview);
    let timer = null;
    const refresh = async () => {
      const body = new URLSearchParams(new FormData(form));
      body.set("action", "preview");
      // getAttribute: the form's buttons named "action" hide its `action` property.
      const answer = await fetch(form.getAttribute("action"), { method: "POST", body, credentials: "same-origin" });
      const page = new DOMParser().parseFromString(await answer.text(), "text/html");
      const fresh = page.getElementById(form.dataset.livePreview);
      if (fresh && region) region.replaceChildren(...fresh.childNodes);
    };
    form.addEventListener("input", () => {
      clearTimeout(timer);
      timer = setTimeout(() => refresh().catch(() => {}), 600);
    });
  }
  // A merge tag's Insert button puts the tag where the cursor is in its text area.
  for (const button of document.querySelectorAll("button[data-insert]")) {
    button.hidden = false;
    button.addEventListener("click", () => {
      const area = document.getElementById(button.dataset.insert);
      if (!area) return;
      const at = area.selectionStart ?? area.value.length;
      area.value = area.value.slice(0, at) + button.dataset.tag + area.value.slice(area.selectionEnd ?? at);
      area.focus();
      area.dispatchEvent(new Event("input", { bubbles: true }));
    });
  }
  // A region marked data-refresh (a campaign's sending progress, an import's) is fetched again every that many
  // seconds and swapped in, until the page answered no longer marks it.
  for (const region of document.querySelectorAll("[data-refresh]")) {
    const every = Number(region.dataset.refresh) * 1000;
    const again = async () => {
      const answer = await fetch(window.location.href, { credentials: "same-origin" });
      // The page now leads elsewhere (an import's progress, once it ended, to its report): go there.
      if (answer.redirected) return window.location.assign(answer.url);
      const fresh = new DOMParser().parseFromString(await answer.text(), "text/html").getElementById(region.id);
      if (!fresh) return;
      region.replaceChildren(...fresh.childNodes);
      if (fresh.hasAttribute("data-refresh")) setTimeout(() => again().catch(() => {}), every);
    };
    setTimeout(() => again().catch(() => {}), every);
  }
});
