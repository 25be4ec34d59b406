// Starts Swagger UI on /docs with the documents the page lists in #docs-config (a file, not an inline
// script, so that the page's Content-Security-Policy allows scripts from this service only).
window.addEventListener("load", function () {
  var config = JSON.parse(document.getElementById("docs-config").textContent);
  window.ui = SwaggerUIBundle({
    urls: config.urls,
    "urls.primaryName": config.urls[0].name,
    dom_id: "#swagger-ui",
    deepLinking: true,
    // Never send the documents to the public validator (swagger.io): the page uses this service only.
    validatorUrl: null,
    presets: [SwaggerUIBundle.presets.apis, SwaggerUIStandalonePreset],
    plugins: [SwaggerUIBundle.plugins.DownloadUrl],
    layout: "StandaloneLayout",
  });
});
