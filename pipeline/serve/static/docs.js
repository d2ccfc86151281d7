// Starts Swagger UI on /docs (a file, not an inline script, so the Content-Security-Policy allows it).
window.ui = SwaggerUIBundle({
  url: "/openapi.json",
  dom_id: "#swagger-ui",
  layout: "BaseLayout",
  deepLinking: true,
  showExtensions: true,
  showCommonExtensions: true,
  validatorUrl: null, // no badge fetched from validator.swagger.io
  presets: [SwaggerUIBundle.presets.apis],
});
