// SPDX-License-Identifier: MIT
// TensorFlow.js (tfjs-core, the pure JavaScript CPU backend and the graph-model converter), run
// on model inputs zcpipe made: the independent oracle of tests/tfjs/test_tfjs.py.
//
//   node oracle.js MODEL.json OUTDIR INPUT.f32...
//
// Loads the model from the files (model.json and the shards it names, no network), then for each
// INPUT (NHWC float32 of the model's input size) runs the whole graph and writes every output the
// model's signature lists as raw float32 to OUTDIR/<input's name>.<output name>.f32, printing one
// line per output: "<input> <output> <shape>".
"use strict";
const fs = require("fs");
const path = require("path");
const tf = require("@tensorflow/tfjs-core");
require("@tensorflow/tfjs-backend-cpu");
const converter = require("@tensorflow/tfjs-converter");

async function main() {
  const [modelPath, outDir, ...inputs] = process.argv.slice(2);
  if (!modelPath || !outDir || inputs.length === 0) {
    console.error("usage: node oracle.js MODEL.json OUTDIR INPUT.f32...");
    process.exit(2);
  }
  const mj = JSON.parse(fs.readFileSync(modelPath, "utf8"));
  const specs = [];
  const shards = [];
  for (const group of mj.weightsManifest) {
    for (const p of group.paths) shards.push(fs.readFileSync(path.join(path.dirname(modelPath), p)));
    specs.push(...group.weights);
  }
  const weights = Buffer.concat(shards);
  await tf.setBackend("cpu");
  const model = await converter.loadGraphModel({
    load: async () => ({
      modelTopology: mj.modelTopology,
      weightSpecs: specs,
      weightData: weights.buffer.slice(weights.byteOffset, weights.byteOffset + weights.length),
      format: mj.format,
      generatedBy: mj.generatedBy,
      convertedBy: mj.convertedBy,
      signature: mj.signature,
    }),
  });
  const shape = model.inputs[0].shape;
  const names = mj.signature && mj.signature.outputs ? Object.keys(mj.signature.outputs)
                                                      : model.outputs.map((o) => o.name);
  for (const input of inputs) {
    const raw = fs.readFileSync(input);
    const x = tf.tensor(new Float32Array(raw.buffer, raw.byteOffset, raw.length / 4), [1, shape[1], shape[2], 3]);
    let outs = await model.executeAsync(x, names);
    if (!Array.isArray(outs)) outs = [outs];
    for (let i = 0; i < names.length; i++) {
      const data = await outs[i].data();
      const file = path.join(outDir, path.basename(input) + "." + names[i].replace(/[^A-Za-z0-9]/g, "_") + ".f32");
      fs.writeFileSync(file, Buffer.from(new Float32Array(data).buffer));
      console.log(path.basename(input) + " " + names[i] + " " + outs[i].shape.join("x"));
    }
    tf.dispose([x, ...outs]);
  }
}

main().catch((e) => {
  console.error(e && e.stack ? e.stack : String(e));
  process.exit(1);
});
