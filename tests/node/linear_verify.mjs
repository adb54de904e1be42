// Runs @linear/sdk LinearWebhookClient.verify on requests given as JSON on stdin:
// [{"secret", "body_b64", "signature", "now_ms"}...] -> one line per request: "ok" or the error.
import { LinearWebhookClient } from "@linear/sdk/webhooks";

const input = JSON.parse(await new Promise((resolve) => {
  let data = "";
  process.stdin.on("data", (chunk) => (data += chunk));
  process.stdin.on("end", () => resolve(data));
}));
const realNow = Date.now;
for (const r of input) {
  Date.now = () => r.now_ms;
  try {
    new LinearWebhookClient(r.secret).verify(Buffer.from(r.body_b64, "base64"), r.signature);
    console.log("ok");
  } catch (e) {
    console.log(String(e.message));
  }
  Date.now = realNow;
}
