// The survey page: rate the items, then perturb and submit the ratings in this browser through the SDK
// (@ldpsynth/sdk/web, bundled as /sdk.js): the device's privacy ledger in IndexedDB, the Connect protocol
// to the replica's web port. Several people may share this demo's browser: each gets a device ledger.
import * as sdk from "/sdk.js";

const config = await (await fetch("/config.json")).json();
const form = document.getElementById("survey");
const submit = document.getElementById("submit");
const another = document.getElementById("another");
const status = document.getElementById("status");
document.getElementById("epsilon").textContent = String(config.epsilon);

/** A number for people: 4 significant digits (the ledger keeps the exact value). */
const shown = (x) => String(Number(x.toPrecision(4)));

function newPerson() {
  const id = Array.from(crypto.getRandomValues(new Uint8Array(8)), (b) => b.toString(16).padStart(2, "0")).join("");
  sessionStorage.setItem("ldpsynth-person", `person-${id}`);
  return `person-${id}`;
}
let person = sessionStorage.getItem("ldpsynth-person") ?? newPerson();

for (const item of config.items) {
  const set = document.createElement("fieldset");
  set.innerHTML = `<legend></legend><div class="scale"></div>`;
  set.querySelector("legend").textContent = item;
  for (const rating of config.ratings) {
    const label = document.createElement("label");
    label.innerHTML = `<input type="radio"><span></span>`;
    const input = label.querySelector("input");
    Object.assign(input, { name: item, value: String(rating) });
    input.dataset.item = item;
    input.dataset.rating = String(rating);
    label.querySelector("span").textContent = "★".repeat(rating);
    set.querySelector(".scale").append(label);
  }
  form.append(set);
}
form.addEventListener("change", () => {
  submit.disabled = !form.querySelector("input:checked");
});

form.addEventListener("submit", async (event) => {
  event.preventDefault();
  const rows = [...form.querySelectorAll("input:checked")].map((input) => ({ item: input.name,
    rating: Number(input.value) }));
  submit.disabled = true;
  status.textContent = "Randomizing and sending…";
  let ledger;
  try {
    ledger = await sdk.IndexedDbLedger.open(person);
    const client = new sdk.WebClient(config.webUrl);
    const result = await client.submit(config.collection, rows, ledger);
    const ratings = result.sent === 1 ? "rating" : "ratings";
    status.textContent = `Sent ${result.sent} randomized ${ratings}: ${result.acknowledged} stored, `
      + `${result.duplicates} already there. Privacy spent by this device: ε = ${shown(result.epsilonTotal)}.`;
    status.dataset.sent = String(result.sent);
    another.hidden = false;
    form.querySelectorAll("input").forEach((input) => { input.disabled = true; });
  } catch (err) {
    status.textContent = `Not sent: ${err.message}`;
    submit.disabled = false;
  } finally {
    ledger?.close();
  }
});

another.addEventListener("click", () => {
  person = newPerson();
  form.reset();
  form.querySelectorAll("input").forEach((input) => { input.disabled = false; });
  another.hidden = true;
  submit.disabled = true;
  status.textContent = "";
  delete status.dataset.sent;
});
