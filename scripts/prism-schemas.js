// prism-schemas.js compiles every schema Prism validates against, as
// Prism 5.16 does (its JSON Schema conversion of the OpenAPI document, then
// Ajv with Prism's options), and fails naming each one Ajv refuses: Prism
// skips a schema it cannot compile without a word, so a response it should
// check would pass unchecked.
//
// usage: npx -p @stoplight/prism-cli@5.16.0 node scripts/prism-schemas.js openapi.yaml
'use strict';
const path = require('path');
const { createRequire } = require('module');

// npx -p puts the package's node_modules/.bin on PATH; resolve Prism's
// own modules (and its Ajv) from there.
const bin = (process.env.PATH || '').split(path.delimiter).find(d => {
  try {
    require('fs').accessSync(path.join(d, 'prism'));
    return d.endsWith(path.join('node_modules', '.bin'));
  } catch {
    return false;
  }
});
if (!bin) {
  console.error('prism-schemas: run it with npx -p @stoplight/prism-cli@VERSION node ...');
  process.exit(2);
}
const fromPrism = createRequire(require.resolve('@stoplight/prism-http', { paths: [path.dirname(bin)] }));
const { getHttpOperationsFromSpec } = fromPrism('@stoplight/prism-http');
const Ajv = fromPrism('ajv').default;
const addFormats = fromPrism('ajv-formats').default;

// Prism's options (prism-http's validator/validators/utils.js).
const ajv = new Ajv({ allErrors: true, allowUnionTypes: true, allowMatchingProperties: true, strict: false, logger: false });
addFormats(ajv);

function* schemas(op) {
  const req = op.request || {};
  for (const c of (req.body && req.body.contents) || []) yield [`request body ${c.mediaType}`, c.schema];
  for (const where of ['headers', 'query', 'path', 'cookie']) {
    for (const p of req[where] || []) yield [`request ${where} ${p.name}`, p.schema];
  }
  for (const r of op.responses || []) {
    for (const c of r.contents || []) yield [`${r.code} body ${c.mediaType}`, c.schema];
    for (const h of r.headers || []) yield [`${r.code} header ${h.name}`, h.schema];
  }
}

(async () => {
  const ops = await getHttpOperationsFromSpec(process.argv[2]);
  let checked = 0;
  const failed = [];
  for (const op of ops) {
    for (const [where, schema] of schemas(op)) {
      if (!schema) continue;
      checked++;
      try {
        ajv.compile({ ...schema, __bundled__: op.__bundled__ });
      } catch (e) {
        failed.push(`${op.method.toUpperCase()} ${op.path} ${where}: ${e.message}`);
      }
    }
  }
  for (const f of failed) console.error(`prism-schemas: ${f}`);
  if (failed.length) {
    console.error(`prism-schemas: Prism cannot compile ${failed.length} of ${checked} schemas; it would not check them`);
    process.exit(1);
  }
  console.error(`prism-schemas: all ${checked} schemas compile`);
})().catch(e => {
  console.error(`prism-schemas: ${e.stack || e}`);
  process.exit(2);
});
