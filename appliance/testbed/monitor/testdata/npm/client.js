// Drives ovfwd's TCP management interface with the npm package
// telnet-openvpn, unmodified, installed by the monitor suite into a
// temporary directory (NODE_PATH).
//
// Usage: node client.js HOST PORT PASSWORD KILL_CN
//
// It prints each event the library emits as one JSON line:
// {"data": …} for what it parsed (success, pid, bytecount_cli), {"log": …}
// for the other lines (the status output), {"error": …} for errors.
const TelnetVPN = require('telnet-openvpn');

const [host, port, password, killCN] = process.argv.slice(2);
const vpn = new TelnetVPN();
vpn.on('data', d => console.log(JSON.stringify({data: d})));
vpn.on('log', d => console.log(JSON.stringify({log: d})));
vpn.on('error', e => console.log(JSON.stringify({error: String(e)})));
const sleep = ms => new Promise(r => setTimeout(r, ms));

// exec resolves when telnet-client's send times out waiting for a prompt
// the management interface never prints; a short sendTimeout keeps it quick.
vpn.connect({host, port: Number(port), negotiationMandatory: false, timeout: 10000, sendTimeout: 300})
  .then(async () => {
    await vpn.exec(password);
    await vpn.exec('pid');
    await vpn.exec('status 2');
    await vpn.exec('bytecount 1');
    await sleep(2500);
    await vpn.exec('bytecount 0');
    await vpn.exec('kill ' + killCN);
    await sleep(300);
    await vpn.destroy();
    process.exit(0);
  })
  .catch(e => {
    console.log(JSON.stringify({error: String(e)}));
    process.exit(1);
  });
