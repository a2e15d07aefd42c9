"""Writes the synthetic sample dataset in this folder (deterministic; run to regenerate).

Six fictional companies, one earnings call each. Every figure is invented and internally
consistent; the reference summary's facts come from the key sentences whose 1-based line
numbers are recorded as ``gold_lines``. Nothing here is copied from any real call.

    python data/sample/make_sample.py
"""

from __future__ import annotations

import json
import random
from pathlib import Path

HERE = Path(__file__).resolve().parent

COMPANIES = [
    dict(ticker="KBTX", name="Kestrel Robotics", industry="industrial robotics", q=3, year=2024,
         ceo="Marta Ilves", cfo="Daniel Okafor", unit="million", rev=612.4, growth=14.2,
         gm=41.8, om=16.3, eps=1.27, adj_eps=1.41, fcf=88.6, buyback=50, div=0.18,
         nq_lo=630, nq_hi=650, fy_lo=2.41, fy_hi=2.46, beat=True,
         segments=[("collaborative arms", 274.9, 22.5), ("warehouse automation", 211.3, 9.8),
                   ("service and software", 126.2, 7.1)],
         products=["the K7 collaborative arm", "our FleetSense orchestration software",
                   "the new palletizing cell"],
         drivers=["automotive retooling in Mexico", "e-commerce fulfilment centres",
                  "battery plants in the American South"],
         headcount=5820, sites=14, prior_rev=536.3),
    dict(ticker="HRBK", name="Harbor Crest Bancorp", industry="regional banking", q=2, year=2023,
         ceo="Elena Vasquez", cfo="Robert Lindqvist", unit="million", rev=287.6, growth=-3.4,
         gm=None, om=None, nim=3.12, eps=0.94, adj_eps=0.97, fcf=None, buyback=25, div=0.33,
         nq_lo=None, nq_hi=None, fy_lo=1.12, fy_hi=1.15, beat=False, deposits=21.8, loans=17.4,
         cet1=11.2, provision=38.5,
         segments=[("commercial banking", 151.2, -1.9), ("consumer banking", 98.7, -6.3),
                   ("wealth management", 37.7, 2.4)],
         products=["our treasury management platform", "the small-business lending desk",
                   "the new digital onboarding app"],
         drivers=["higher deposit costs", "softer mortgage origination",
                  "steady commercial loan demand in the Carolinas"],
         headcount=3410, sites=162, prior_rev=297.7),
    dict(ticker="NMBS", name="Nimbus Ledger", industry="enterprise software", q=4, year=2024,
         ceo="Priya Raman", cfo="Thomas Becker", unit="million", rev=198.3, growth=27.6,
         gm=78.4, om=9.7, eps=0.21, adj_eps=0.38, fcf=41.9, buyback=0, div=None,
         nq_lo=205, nq_hi=208, fy_lo=0.93, fy_hi=0.95, beat=True, arr=812.0, nrr=118,
         customers=2140,
         segments=[("subscription", 181.6, 30.2), ("professional services", 16.7, 3.1)],
         products=["the Ledger AI close assistant", "our revenue recognition module",
                   "the new procurement suite"],
         drivers=["mid-market finance teams", "multi-entity consolidation deals",
                  "partner-sourced pipeline in Europe"],
         headcount=1960, sites=9, prior_rev=155.4),
    dict(ticker="TMBR", name="Timberline Outfitters", industry="specialty retail", q=1, year=2025,
         ceo="Grace Holloway", cfo="Samuel Ortiz", unit="million", rev=455.8, growth=-1.8,
         gm=38.6, om=5.2, eps=0.47, adj_eps=0.52, fcf=-12.4, buyback=15, div=0.12,
         nq_lo=470, nq_hi=485, fy_lo=1.98, fy_hi=2.02, beat=False, comps=-2.9, stores=312,
         segments=[("stores", 318.9, -3.6), ("e-commerce", 136.9, 2.7)],
         products=["our Trailhead loyalty program", "the private-label camping line",
                   "buy online, pick up in store"],
         drivers=["cooler spring weather in the Northeast", "lower traffic from value shoppers",
                  "strong footwear sell-through"],
         headcount=11800, sites=312, prior_rev=464.2),
    dict(ticker="CLVX", name="Cellvance Instruments", industry="life-science tools", q=3,
         year=2023, ceo="Henrik Dahl", cfo="Aisha Mensah", unit="million", rev=341.7, growth=6.9,
         gm=57.2, om=18.9, eps=0.83, adj_eps=1.02, fcf=52.3, buyback=40, div=None,
         nq_lo=355, nq_hi=365, fy_lo=1.34, fy_hi=1.36, beat=True,
         segments=[("instruments", 129.4, 2.1), ("consumables", 176.8, 10.4),
                   ("services", 35.5, 7.8)],
         products=["the Sora single-cell analyzer", "our reagent subscription kits",
                   "the automated sample-prep line"],
         drivers=["biopharma process development", "academic funding in Europe",
                  "recovering demand from Chinese research labs"],
         headcount=4270, sites=11, prior_rev=319.6),
    dict(ticker="SLWD", name="Solward Energy", industry="renewable utility", q=2, year=2025,
         ceo="Jonas Whitfield", cfo="Mei Tanaka", unit="million", rev=724.9, growth=11.5,
         gm=None, om=24.6, eps=0.68, adj_eps=0.74, fcf=96.1, buyback=0, div=0.29,
         nq_lo=None, nq_hi=None, fy_lo=2.85, fy_hi=2.95, beat=True, capacity=9.4, added=640,
         ebitda=402.7,
         segments=[("regulated utility", 412.3, 6.2), ("contracted renewables", 268.1, 19.8),
                   ("storage and services", 44.5, 14.0)],
         products=["the Red Mesa solar and storage project", "our wind repowering program",
                   "the new grid-scale battery fleet"],
         drivers=["new long-term power purchase agreements", "higher wind output in Texas",
                  "rate base growth approved in Arizona"],
         headcount=3150, sites=57, prior_rev=650.1),
]

ANALYSTS = [("Laura Chen", "Morgan Whitley"), ("Ravi Patel", "Goldfinch Securities"),
            ("Owen Brady", "Barclay Hart"), ("Sofia Marques", "Keystone Capital"),
            ("Victor Osei", "Pinecrest Research"), ("Hannah Weiss", "Sterling & Rowe")]


def money(value: float, unit: str = "million") -> str:
    if unit == "million" and value >= 1000:
        return f"${value / 1000:.2f} billion"
    return f"${value:,.1f} {unit}"


def pct(value: float) -> str:
    return f"{abs(value):.1f}%"


class Call:
    def __init__(self, c: dict, rng: random.Random):
        self.c, self.rng = c, rng
        self.lines: list[str] = []
        self.gold: list[int] = []
        self.facts: list[str] = []

    def say(self, text: str, fact: str | None = None) -> None:
        self.lines.append(text)
        if fact:
            self.gold.append(len(self.lines))
            self.facts.append(fact)

    def pick(self, *options: str) -> str:
        return self.rng.choice(options)


def write_call(c: dict, rng: random.Random) -> Call:
    k = Call(c, rng)
    q, y, name, t = c["q"], c["year"], c["name"], c["ticker"]
    up = c["growth"] >= 0
    k.say(f"Good day, and welcome to the {name} fiscal {y} quarter {q} earnings conference call.")
    k.say("All participants are in a listen-only mode, and a question-and-answer session will "
          "follow the prepared remarks.")
    k.say(f"I would now like to turn the call over to Nadia Brooks, head of investor relations "
          f"at {name}.")
    k.say(f"Thank you, operator, and good morning, everyone, and thank you for joining us to "
          f"discuss {name}'s results for the {['first', 'second', 'third', 'fourth'][q - 1]} "
          f"quarter of {y}.")
    k.say(f"With me today are {c['ceo']}, our chief executive officer, and {c['cfo']}, our chief "
          "financial officer.")
    k.say("Before we begin, I would like to remind you that today's discussion contains "
          "forward-looking statements that involve risks and uncertainties.")
    k.say("Actual results may differ materially from those expressed or implied, and we "
          "undertake no obligation to update these statements.")
    k.say("We will also refer to non-GAAP financial measures, and reconciliations to the most "
          "comparable GAAP measures are included in our press release.")
    k.say(f"With that, I will turn the call over to {c['ceo']}.")
    k.say("Thank you, Nadia, and good morning, everyone.")
    tone = (k.pick("We delivered a strong quarter", "This was an excellent quarter for us",
                   "I am proud of how our teams executed this quarter")
            if c["beat"] else
            k.pick("This quarter was more challenging than we expected",
                   "Our results this quarter fell short of our own expectations",
                   "We faced a tougher environment this quarter"))
    k.say(f"{tone}, and I want to start with the headline numbers before {c['cfo'].split()[0]} "
          "walks through the details.")
    direction = "rose" if up else "declined"
    k.say(f"Revenue for the quarter {direction} {pct(c['growth'])} year over year to "
          f"{money(c['rev'])}, compared with {money(c['prior_rev'])} in the same quarter last year.",
          f"q{q} revenue {'rose' if up else 'fell'} {abs(c['growth']):.1f} percent to "
          f"{money(c['rev'])}.")
    for driver in c["drivers"]:
        verb = k.pick("benefited from", "saw the impact of", "was shaped by")
        k.say(f"The quarter {verb} {driver}, which we discussed at our investor day.")
    for product in c["products"]:
        k.say(k.pick(f"Customer adoption of {product} continued to build through the quarter.",
                     f"We are encouraged by early feedback on {product}.",
                     f"Our teams invested heavily in {product}, and we expect it to contribute "
                     "more meaningfully next year."))
    extra_kpis(k)
    k.say(f"Let me spend a moment on strategy, because {c['industry']} is changing quickly and "
          "our customers are asking more of us.")
    k.say(k.pick("First, we are simplifying our portfolio so that every product line earns its "
                 "place on the balance sheet.",
                 "First, we are concentrating investment where we already hold a leading "
                 "position."))
    k.say(k.pick("Second, we are investing in data and automation across our own operations, "
                 "which shortens cycle times and frees our people for higher-value work.",
                 "Second, we keep moving decisions closer to customers, which has made us "
                 "faster and more accountable."))
    k.say("Third, we continue to evaluate small, disciplined acquisitions that add capabilities "
          "rather than scale for its own sake.")
    k.say("None of these priorities is new, but the pace at which we are executing on them is.")
    k.say(f"We ended the quarter with roughly {c['headcount']:,} employees across {c['sites']} "
          "locations, and engagement scores remain among the highest in our history.")
    k.say("We also published our annual sustainability report, which sets out new targets for "
          "emissions and supplier diversity.")
    k.say(k.pick("Looking ahead, our priorities are unchanged: disciplined growth, operational "
                 "excellence and returning capital to shareholders.",
                 "Our strategy remains focused on customers, execution and long-term value "
                 "creation."))
    k.say(f"With that, let me hand it over to {c['cfo']}.")
    k.say(f"Thank you, {c['ceo'].split()[0]}, and good morning.")
    for seg, value, growth in c["segments"]:
        word = "increased" if growth >= 0 else "decreased"
        k.say(f"{seg.capitalize()} revenue {word} {pct(growth)} to {money(value)}, "
              f"{k.pick('reflecting', 'driven by', 'supported by')} "
              f"{k.pick('volume', 'pricing', 'mix')} and "
              f"{k.pick('new customer wins', 'a stronger backlog', 'improved retention')}.")
    if c.get("gm") is not None:
        k.say(f"Gross margin was {pct(c['gm'])}, "
              f"{'up' if c['beat'] else 'down'} {k.rng.choice([40, 60, 90, 120])} basis points "
              f"from a year ago, as {k.pick('productivity gains', 'favorable mix', 'lower freight costs')} "
              f"{'offset' if c['beat'] else 'only partly offset'} wage inflation.")
    if c.get("om") is not None:
        k.say(f"Operating margin came in at {pct(c['om'])} for the quarter.",
              f"q{q} operating margin {c['om']:.1f} percent." if c.get("ticker") in
              ("CLVX", "SLWD") else None)
    if c.get("nim") is not None:
        k.say(f"Net interest margin was {c['nim']:.2f}%, down from the prior quarter as deposit "
              "costs continued to rise faster than asset yields.",
              f"q{q} net interest margin {c['nim']:.2f} percent.")
        k.say(f"We recorded a provision for credit losses of {money(c['provision'])}, primarily "
              "reflecting reserve builds in commercial real estate.",
              f"q{q} provision for credit losses {money(c['provision'])}.")
    k.say(f"Operating expenses were well controlled, and we continue to find efficiencies in "
          f"{k.pick('procurement', 'facilities', 'shared services')}.")
    k.say(f"GAAP diluted earnings per share were ${c['eps']:.2f}.",
          f"q{q} gaap earnings per share ${c['eps']:.2f}.")
    k.say(f"Adjusted earnings per share were ${c['adj_eps']:.2f}, "
          f"{'ahead of' if c['beat'] else 'below'} the consensus expectation.",
          f"q{q} adjusted earnings per share ${c['adj_eps']:.2f}.")
    if c.get("fcf") is not None:
        if c["fcf"] >= 0:
            k.say(f"Free cash flow was {money(c['fcf'])} in the quarter, and we ended with a "
                  "healthy balance sheet and ample liquidity.")
        else:
            k.say(f"Free cash flow was negative {money(-c['fcf'])}, reflecting seasonal inventory "
                  "builds ahead of the summer season.")
    if c.get("ebitda") is not None:
        k.say(f"Adjusted EBITDA was {money(c['ebitda'])} for the quarter.",
              f"q{q} adjusted ebitda {money(c['ebitda'])}.")
    if c["buyback"]:
        k.say(f"During the quarter we repurchased {money(c['buyback'])} of our shares under the "
              "existing authorization.")
    if c.get("div"):
        k.say(f"The board declared a quarterly dividend of ${c['div']:.2f} per share, payable next "
              "month.",
              f"declares quarterly dividend of ${c['div']:.2f} per share." if t in ("HRBK",)
              else None)
    k.say("Capital expenditures were in line with our plan, and we continue to prioritize "
          "projects with the highest returns.")
    k.say("Turning to our outlook.")
    if c.get("nq_lo"):
        k.say(f"For the {['first', 'second', 'third', 'fourth'][q % 4]} quarter, we expect "
              f"revenue in the range of {money(c['nq_lo'])} to {money(c['nq_hi'])}.",
              f"sees q{q % 4 + 1} revenue {money(c['nq_lo'])} to {money(c['nq_hi'])}.")
    fy = y if q < 4 else y + 1
    k.say(f"For fiscal {fy}, we now expect adjusted earnings per share of ${c['fy_lo']:.2f} to "
          f"${c['fy_hi']:.2f}.",
          f"sees fy {fy} adjusted eps ${c['fy_lo']:.2f} to ${c['fy_hi']:.2f}.")
    k.say(k.pick("This outlook assumes no meaningful change in the macroeconomic environment.",
                 "Our guidance reflects current exchange rates and no further deterioration in "
                 "demand."))
    k.say("With that, operator, please open the line for questions.")
    k.say("Thank you. We will now begin the question-and-answer session.")
    for analyst, firm in rng.sample(ANALYSTS, 5):
        qa_block(k, analyst, firm)
    k.say("That concludes the question-and-answer session, and I would like to turn the call "
          f"back to {c['ceo']} for closing remarks.")
    k.say("Thank you all for your questions and for your continued interest in "
          f"{name}.")
    k.say("We look forward to updating you on our progress next quarter.")
    k.say("This concludes today's conference call, and you may now disconnect.")
    return k


def extra_kpis(k: Call) -> None:
    c = k.c
    q = c["q"]
    if "arr" in c:
        k.say(f"Annual recurring revenue reached {money(c['arr'])}, and net revenue retention was "
              f"{c['nrr']}%.", f"annual recurring revenue {money(c['arr'])}.")
        k.say(f"We now serve more than {c['customers']:,} customers, including 41 of the Fortune "
              "100.")
    if "deposits" in c:
        k.say(f"Total deposits were ${c['deposits']:.1f} billion and total loans were "
              f"${c['loans']:.1f} billion at quarter end.")
        k.say(f"Our common equity tier 1 ratio was {c['cet1']:.1f}%, well above regulatory "
              "minimums.")
    if "comps" in c:
        k.say(f"Comparable sales decreased {pct(c['comps'])}, with traffic down and average ticket "
              "slightly higher.", f"q{q} comparable sales fell {abs(c['comps']):.1f} percent.")
        k.say(f"We ended the quarter with {c['stores']} stores after opening four and closing "
              "two.")
    if "capacity" in c:
        k.say(f"We placed {c['added']} megawatts of new capacity in service, bringing our "
              f"operating fleet to {c['capacity']:.1f} gigawatts.",
              f"added {c['added']} megawatts of new capacity.")


QUESTIONS = [
    ("margins", "Can you unpack the drivers of margin this quarter and how you think about the "
     "trajectory into next year?",
     "On margins, the biggest lever remains mix, and we expect gradual improvement as newer "
     "products scale."),
    ("demand", "How would you characterize the demand environment exiting the quarter, and did "
     "anything change in the last few weeks?",
     "Demand held up broadly as we expected, with some customers taking longer to approve "
     "larger commitments."),
    ("capital", "How are you prioritizing capital allocation between reinvestment, buybacks and "
     "acquisitions?",
     "Our first priority is organic investment, and we will stay opportunistic on buybacks while "
     "keeping the balance sheet flexible."),
    ("pricing", "Are you seeing any pushback on pricing from customers?",
     "We have not seen meaningful pushback; our pricing actions have largely held, with "
     "targeted promotions where needed."),
    ("guidance", "What is embedded in the guidance for the back half of the year?",
     "The range assumes a stable environment; the low end reflects slower conversion of our "
     "pipeline."),
    ("costs", "Where are you finding cost efficiencies, and how much more is there to go?",
     "We still see opportunity in procurement and automation of back-office processes, phased "
     "over the next several quarters."),
]


def qa_block(k: Call, analyst: str, firm: str) -> None:
    c = k.c
    k.say(f"Our next question comes from {analyst} with {firm}.")
    k.say("Hi, thanks for taking my question, and congratulations to the team on the quarter.")
    topic, question, answer = k.rng.choice(QUESTIONS)
    k.say(question)
    speaker = c["cfo"] if topic in ("margins", "capital", "guidance", "costs") else c["ceo"]
    k.say(f"Thanks, {analyst.split()[0]}, this is {speaker.split()[0]}.")
    k.say(answer)
    seg, value, growth = k.rng.choice(c["segments"])
    k.say(f"To give you a sense of scale, {seg} was {money(value)} this quarter, and we think "
          "that business can keep growing faster than the company overall.")
    k.say(k.pick("We are being careful not to get ahead of ourselves, but the early signals are "
                 "positive.",
                 "It is still early, and we will share more detail at our next investor event.",
                 "We feel good about the visibility we have today."))
    k.say(f"That is helpful, thank you, and maybe one follow-up on "
          f"{k.rng.choice(c['products'])}.")
    k.say(f"How should we think about its contribution over the next {k.rng.choice([2, 3, 4])} "
          "quarters?")
    k.say("It is a fair question, and we do not break it out separately today, but it is one of "
          "the fastest-growing parts of our portfolio.")
    k.say(f"We had {k.rng.randint(12, 60)} new customer deployments in the quarter, and the "
          "pipeline behind them is larger than at this time last year.")
    k.say("Great, thank you very much.")


def main() -> None:
    rng = random.Random(20241122)
    docs, tasks = [], []
    (HERE / "documents").mkdir(exist_ok=True)
    for c in COMPANIES:
        call = write_call(c, random.Random(rng.random()))
        doc_id = f"{c['ticker']}_q{c['q']}_{c['year']}"
        (HERE / "documents" / f"{doc_id}.txt").write_text("\n".join(call.lines) + "\n",
                                                          encoding="utf-8")
        docs.append({"doc_id": doc_id, "path": f"documents/{doc_id}.txt", "company": c["name"],
                     "ticker": c["ticker"], "doc_type": "EARNINGS_CALL",
                     "period": f"Q{c['q']} {c['year']}", "industry": c["industry"]})
        tasks.append({"id": doc_id, "task_type": "summarization", "doc_ids": [doc_id],
                      "question": f"Summarize the key highlights from {c['ticker']}'s Q{c['q']} "
                                  f"{c['year']} earnings call.",
                      "reference": "\n".join(call.facts), "gold_lines": {doc_id: call.gold}})
    (HERE / "documents.jsonl").write_text("".join(json.dumps(d) + "\n" for d in docs))
    (HERE / "tasks.jsonl").write_text("".join(json.dumps(t) + "\n" for t in tasks))


if __name__ == "__main__":
    main()
