// The reference Bluesky PDS and an in-memory did:plc directory, on loopback only.
//
// Configured by the environment the PDS itself reads (PDS_*), plus PLC_PORT for the directory.
// Prints one JSON line {"plc": url, "pds": url} once both answer, and runs until killed.
import net from "node:net";
import { createRequire } from "node:module";

const require = createRequire(import.meta.url);
const { PDS, envToCfg, envToSecrets, readEnv } = require("@atproto/pds");
const plc = require("@did-plc/server");

// Both servers call listen(port) with no host, which binds every interface: a test server
// must not be reachable from the network.
const listen = net.Server.prototype.listen;
net.Server.prototype.listen = function (...args) {
  if (typeof args[0] === "number" && typeof args[1] !== "string") {
    args.splice(1, 0, "127.0.0.1");
  }
  return listen.apply(this, args);
};

const plcPort = Number(process.env.PLC_PORT);
const directory = await plc.PlcServer.create({ db: plc.Database.mock(), port: plcPort });
await directory.start();

const env = readEnv();
const pds = await PDS.create(envToCfg(env), envToSecrets(env));
await pds.start();

const stop = async () => {
  await pds.destroy();
  await directory.destroy();
  process.exit(0);
};
process.on("SIGTERM", stop);
process.on("SIGINT", stop);

console.log(
  JSON.stringify({ plc: `http://localhost:${plcPort}`, pds: `http://localhost:${env.port}` }),
);
