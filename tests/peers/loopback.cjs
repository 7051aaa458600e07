// Preload for Node test peers (`node --require tests/peers/loopback.cjs server.js`): a server that
// calls listen(port) on all interfaces binds 127.0.0.1 instead, and once it listens its address
// is printed as the first line on stdout (`http://127.0.0.1:PORT`), so PORT=0 picks a free port.
"use strict";
const net = require("net");
const listen = net.Server.prototype.listen;
let announced = false;
net.Server.prototype.listen = function (...args) {
  const first = args[0];
  const isPort = typeof first === "number" || (typeof first === "string" && /^\d+$/.test(first));
  if (isPort && typeof args[1] !== "string") {
    args.splice(1, 0, "127.0.0.1");
  } else if (first && typeof first === "object" && !first.path && first.host === undefined) {
    args[0] = { ...first, host: "127.0.0.1" };
  }
  this.once("listening", () => {
    const addr = this.address();
    if (!announced && addr && typeof addr === "object") {
      announced = true;
      process.stdout.write(`http://127.0.0.1:${addr.port}\n`);
    }
  });
  return listen.apply(this, args);
};
