#!/usr/bin/env node
// Node's own https client behind a forward proxy, run by tokenproxy's end-to-end tests.
//
// `node node_https_client.js URL [URL ...]`: GETs each URL in turn through the proxy named by
// HTTPS_PROXY, on one keep-alive agent, trusting NODE_EXTRA_CA_CERTS as Node does by itself. Node's
// http, https and fetch ignore HTTPS_PROXY, so a proxy agent is needed: the real https-proxy-agent
// where this machine has it (npm's bundled copy, or Debian's node-https-proxy-agent), else a small
// CONNECT agent written here. Prints one JSON object on stdout:
// {"agent": "...", "results": [{"status", "body", "reused"}], "error": "..."}
"use strict";
const http = require("http");
const https = require("https");
const tls = require("tls");

const proxy = process.env.HTTPS_PROXY || process.env.https_proxy;

// The places a real https-proxy-agent lives: npm's bundle (NodeSource's nodejs) and Debian's package.
const candidates = [
  "/usr/lib/node_modules/npm/node_modules/https-proxy-agent",
  "/usr/share/nodejs/https-proxy-agent",
];

function realAgent() {
  for (const path of candidates) {
    let module;
    try {
      module = require(path);
    } catch (error) {
      continue;
    }
    const version = require(path + "/package.json").version;
    const major = parseInt(version.split(".")[0], 10);
    if (major >= 7) {
      return { agent: new module.HttpsProxyAgent(proxy, { keepAlive: true }), name: "https-proxy-agent " + version };
    }
    // Versions before 7 (Debian 12's 5.0.1) take an options object and keep no sockets.
    const Agent = module.HttpsProxyAgent || module;
    const url = new URL(proxy);
    return { agent: new Agent({ host: url.hostname, port: url.port, keepAlive: true }), name: "https-proxy-agent " + version };
  }
  return null;
}

// A CONNECT agent: an https.Agent whose sockets are TLS over a tunnel the proxy opened.
class ConnectAgent extends https.Agent {
  createConnection(options, callback) {
    const url = new URL(proxy);
    const target = options.host + ":" + options.port;
    const request = http.request({ host: url.hostname, port: url.port, method: "CONNECT", path: target, headers: { Host: target } });
    request.on("connect", (answer, socket) => {
      if (answer.statusCode !== 200) {
        socket.destroy();
        callback(new Error("CONNECT answered " + answer.statusCode));
        return;
      }
      callback(null, tls.connect({ socket, servername: options.servername || options.host, ALPNProtocols: ["http/1.1"] }));
    });
    request.on("error", callback);
    request.end();
  }
}

function get(agent, url) {
  return new Promise((resolve, reject) => {
    const request = https.get(url, { agent }, (response) => {
      const chunks = [];
      response.on("data", (chunk) => chunks.push(chunk));
      response.on("end", () =>
        resolve({ status: response.statusCode, body: Buffer.concat(chunks).toString("utf8"), reused: request.reusedSocket }),
      );
      response.on("error", reject);
    });
    request.on("error", reject);
    request.setTimeout(30000, () => request.destroy(new Error("timeout")));
  });
}

async function main() {
  const out = { agent: null, results: [], error: null };
  try {
    const found = realAgent() || { agent: new ConnectAgent({ keepAlive: true }), name: "connect-agent" };
    out.agent = found.name;
    for (const url of process.argv.slice(2)) {
      out.results.push(await get(found.agent, url));
    }
    found.agent.destroy();
  } catch (error) {
    out.error = String(error && error.message ? error.message : error);
  }
  process.stdout.write(JSON.stringify(out) + "\n");
}

main();
