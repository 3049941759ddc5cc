// Writes src/crds.generated.ts from crds/*.yaml: the component has no file
// system, so describe() carries the CRDs as text compiled into it.
import { readFileSync, writeFileSync } from "node:fs";

const service = readFileSync("crds/__PLURAL__.__GROUP__.yaml", "utf8");
const providerConfig = readFileSync("crds/providerconfigs.__GROUP__.yaml", "utf8");
writeFileSync(
  "src/crds.generated.ts",
  `// Written by crds.mjs from crds/; do not edit.\nexport const SERVICE_CRD = ${JSON.stringify(service)};\nexport const PROVIDER_CONFIG_CRD = ${JSON.stringify(providerConfig)};\n`,
);
