type Json = Record<string, unknown>;

const escapeHtml = (text: unknown) =>
  String(text ?? "").replace(
    /[&<>"']/g,
    (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c] as string,
  );

/**
 * A self-contained HTML page of the OpenAPI document: no script or stylesheet from elsewhere,
 * so it renders on a machine without internet and under a strict CSP.
 */
export function renderDocsPage(doc: Json): string {
  const info = doc.info as { title: string; version: string; description: string };
  const sections: string[] = [];
  for (const [path, item] of Object.entries(doc.paths as Record<string, Record<string, Json>>)) {
    for (const [method, op] of Object.entries(item)) {
      const params = (op.parameters as Json[]).map(
        (p) =>
          `<li><code>${escapeHtml(p.name)}</code> (${escapeHtml(p.in)}${p.required ? ", required" : ""})${p.description ? ` ${escapeHtml(p.description)}` : ""}</li>`,
      );
      const body = (op.requestBody as { content: Record<string, { schema: Json }> } | undefined)?.content[
        "application/json"
      ]?.schema;
      const responses = Object.entries(op.responses as Record<string, { description: string }>).map(
        ([status, r]) => `<li><b>${escapeHtml(status)}</b> ${escapeHtml(r.description)}</li>`,
      );
      sections.push(`<section>
<h3><span class="m ${escapeHtml(method)}">${escapeHtml(method.toUpperCase())}</span> <code>${escapeHtml(path)}</code></h3>
<p>${escapeHtml(op.summary)}${op["x-scope"] ? ` <small>scope: <code>${escapeHtml(op["x-scope"])}</code></small>` : ""}</p>
${op.description ? `<p>${escapeHtml(op.description)}</p>` : ""}
${params.length ? `<h4>Parameters</h4><ul>${params.join("")}</ul>` : ""}
${body ? `<h4>Body</h4><pre>${escapeHtml(JSON.stringify(body, null, 2))}</pre>` : ""}
<h4>Responses</h4><ul>${responses.join("")}</ul>
</section>`);
    }
  }
  return `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>${escapeHtml(info.title)} ${escapeHtml(info.version)}</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>body{font:15px/1.5 system-ui,sans-serif;max-width:960px;margin:2em auto;padding:0 1em;color:#222}
section{border-top:1px solid #ddd;padding:.5em 0}pre{background:#f6f6f6;padding:.75em;overflow:auto;font-size:12px}
.m{display:inline-block;min-width:4em;font-size:12px;color:#fff;padding:2px 6px;border-radius:3px;text-align:center}
.get{background:#2f7d32}.post{background:#1565c0}.put{background:#8a5a00}.patch{background:#6a1b9a}.delete{background:#b71c1c}</style></head>
<body><h1>${escapeHtml(info.title)} <small>${escapeHtml(info.version)}</small></h1><p>${escapeHtml(info.description)}</p>
<p>Machine-readable: <a href="openapi.json">openapi.json</a>. Authenticate with <code>X-API-Key</code> or <code>Authorization: Bearer</code>.</p>
${sections.join("\n")}</body></html>`;
}
