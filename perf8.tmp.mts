import { launchChromium } from './test/support/browser.js';
import { serveStatic } from './test/support/static-server.js';
const server = await serveStatic('/work/wt-8/dist-inspector');
const b = await launchChromium();
const page = await b.context.newPage();
for (const [dp, speed] of [[1, 4], [2, 4], [4, 4]]) {
  await page.goto(`${server.url}/?numBlocks=65536&dpSize=${dp}&maxRunning=64&requests=4000&speed=${speed}`);
  await page.waitForFunction('window.kvpoolInspector && window.kvpoolInspector.ready');
  await page.click('#play');
  const r: number[] = await page.evaluate(`new Promise((res) => { const t = []; const f = (now) => { t.push(now); if (t.length < 120) requestAnimationFrame(f); else res(t); }; requestAnimationFrame(f); })`);
  await page.click('#play');
  console.log(dp, speed, ((r[r.length-1]! - r[0]!) / (r.length - 1)).toFixed(1), await page.textContent('#perf'));
}
await b.close(); await server.close();
