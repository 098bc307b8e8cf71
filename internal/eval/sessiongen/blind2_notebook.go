package sessiongen

import (
	"fmt"
	"strings"
)

// notebookWork cleans up a churn-analysis repository of Jupyter notebooks:
// code moves into a package, notebooks are renamed, executed and edited
// cell by cell.
type notebookWork struct {
	*bgen
	pool      *fillerPool
	seed      int
	figs      string
	cutOld    string
	cutNew    string
	cache     string
	auc, prAU string
	errCol    [2]string
	segNB     string
	modelOld  string
	modelNew  string
	ask1      string
	ask2      string
	rows      int
	failTst   string
	binsBad   int
}

func newNotebookWork(b *bgen) work {
	k := &notebookWork{bgen: b, seed: b.between(1000, 9999)}
	k.figs = "reports/figures/" + b.word()
	k.cutOld, k.cutNew = pick(b, "2025-03-31", "2025-06-30"), pick(b, "2025-09-30", "2025-12-31")
	k.cache = "data/interim/" + b.word() + ".parquet"
	k.auc, k.prAU = fmt.Sprintf("0.%d", b.between(8100, 8999)), fmt.Sprintf("0.%d", b.between(3100, 4999))
	k.errCol = pick(b, [2]string{"signup_dt", "signup_date"}, [2]string{"plan_tier", "plan_level"}, [2]string{"mrr_usd", "monthly_revenue"})
	k.segNB = "notebooks/04_" + b.word() + "_segments.ipynb"
	k.modelOld, k.modelNew = "models/"+b.word()+".joblib", "models/churn-"+b.word()+".joblib"
	k.ask1 = pick(b, "a calibration curve", "a lift chart by decile", "a confusion matrix at the chosen threshold")
	k.ask2 = pick(b, "a SHAP summary plot", "a partial dependence plot for tenure", "a cohort retention heatmap")
	k.rows = b.between(41000, 98000)
	k.failTst = "test_" + b.word() + "_bins"
	k.binsBad = b.between(11, 13)
	k.pool = b.newPool(pythonLang, "src/churn/load.py", "src/churn/features.py", "src/churn/plots.py", "src/churn/metrics.py", "tests/test_features.py")
	b.summary = "1. Primary request: clean up the churn-analysis notebooks so they run top to bottom and share code through the churn package.\n" +
		"2. Work so far: the notebooks and the package modules were read and tidied; the tests pass.\n3. Continue with the user's most recent request."
	return k
}

func (k *notebookWork) project() (string, string, string) {
	return "churn-analysis", "/home/priya/work/churn-analysis", "cleanup/notebooks"
}

func (k *notebookWork) filler() { k.fillerTurn(k.pool) }

// cells renders python source as the Read tool shows a notebook's cells.
func (k *notebookWork) cells(src string) string {
	var s strings.Builder
	for i, c := range strings.Split(src, "\n\n\n") {
		fmt.Fprintf(&s, "<cell id=\"c%02d\">%s</cell>\n", i+1, c)
	}
	return s.String()
}

func (k *notebookWork) first() {
	k.w.prompt(fmt.Sprintf("This repo is three years of churn notebooks nobody can rerun. I want them cleaned up: the feature code that's copy-pasted between 01_explore, 02_features and 03_model should live in src/churn/ and be imported, every notebook should run top to bottom on a fresh kernel, and the outputs shouldn't be committed. Start by reading notebooks/02_features.ipynb and src/churn/features.py and tell me what's duplicated. For the whole job: use random_state=%d everywhere something is random (splits, models, sampling) — the business team compares numbers between our runs and anything else makes them open tickets.", k.seed))
	k.w.read(nil, "notebooks/02_features.ipynb", k.cells(k.source(pythonLang, "notebooks/02_features.ipynb")))
	k.w.read(nil, "src/churn/features.py", k.pool.get(k.bgen, "src/churn/features.py").src)
	k.w.respond(text("Duplicated: the tenure bucketing, the one-hot encoding of the plan column and the date parsing are in both the notebook and features.py, slightly different each time. I'd make features.py the single version and have the notebooks import it."))
	k.fact(Fact{Category: CatExtraction, Kind: "instruction", Question: "Which random seed must every random step use?", Expect: []string{fmt.Sprintf("random_state=%d", k.seed)}})
}

func (k *notebookWork) beats() []beat {
	return []beat{
		{0.05, k.passingPreference}, {0.11, k.cutoff}, {0.18, k.cacheDecision}, {0.27, k.runModel},
		{0.36, k.keyError}, {0.45, k.impute}, {0.52, k.reorganize}, {0.60, k.temporal},
		{0.68, k.frameSize}, {0.76, k.bins}, {0.84, k.renameModel}, {0.90, k.reverseImpute},
	}
}

func (k *notebookWork) passingPreference() {
	k.w.prompt(fmt.Sprintf("Next the plots. Half the cells in 03 call plt.show() with a default figsize, the colours change between notebooks, and the one with the monthly cohorts has a legend over the data. I'd like one plotting helper in src/churn/plots.py with a fixed palette. Save every figure as SVG into %s/ — the PNGs look awful in the slide deck once they're scaled — and never rely on the inline output. Before that though, find every cell that still reads data/raw/customers.csv directly instead of going through churn.load.", k.figs))
	var out strings.Builder
	for i := 0; i < 20+k.r.IntN(25); i++ {
		fmt.Fprintf(&out, "notebooks/0%d_%s.ipynb:%d:    \"df = pd.read_csv('data/raw/customers.csv', low_memory=False)  # %s\\n\",\n", 1+k.r.IntN(3), pick(k.bgen, "explore", "features", "model"), 100+k.r.IntN(900), k.fw())
	}
	k.w.grep(nil, `read_csv\(.data/raw`, out.String())
	k.w.respond(text("Those cells read the raw CSV directly; I'll switch each to churn.load.customers() as I touch the notebooks."))
	k.fact(Fact{Category: CatExtraction, Kind: "preference", Question: "Where and in which format should figures be saved?", Expect: []string{k.figs, "SVG"}})
}

func (k *notebookWork) cutoff() {
	k.w.prompt(fmt.Sprintf("The train/test split should be by date, not random: everything up to %s is train — sorry, %s, the Q3 data landed last week — and after that is test.", k.cutOld, k.cutNew))
	feat := k.pool.get(k.bgen, "src/churn/features.py").src
	k.multiEdit(nil, "src/churn/features.py", firstLine(feat, 2), firstLine(feat, 2)+"  # split by date, not at random", firstLine(feat, 6), fmt.Sprintf("CUTOFF = pd.Timestamp(%q)\n\n\ndef split_by_date(df):\n    return df[df.signup_date <= CUTOFF], df[df.signup_date > CUTOFF]", k.cutNew))
	k.w.respond(text("split_by_date is in features.py with the cutoff as a constant."))
	k.fact(Fact{Category: CatKnowledgeUpdate, Kind: "value", Question: "What is the train/test cutoff date?", Expect: []string{k.cutNew}, Superseded: []string{k.cutOld}})
}

func (k *notebookWork) cacheDecision() {
	k.w.prompt("every notebook spends ages in the first cell, can we do something about that?")
	k.w.bash(nil, "python -X importtime -c 'import churn.load as l; l.customers()' 2>&1 | tail -3", "Time the load", fmt.Sprintf("import time: %d | %d | churn.load\nread_csv: %d.%ds\ndtypes inferred: 37 columns, 4 as object", k.between(900, 3000), k.between(4000, 9000), k.between(31, 58), k.r.IntN(10)), 0)
	k.w.respond(text(fmt.Sprintf("The CSV parse is most of it, and pandas infers different dtypes depending on which rows it samples. I'd write the cleaned frame once to %s and have churn.load read that when it's newer than the CSV: parquet keeps the dtypes fixed and loads in about a second. Do that?", k.cache)))
	k.w.prompt("yes")
	k.w.edit(nil, "src/churn/load.py", firstLine(k.pool.get(k.bgen, "src/churn/load.py").src, 5), fmt.Sprintf("CACHE = Path(%q)\n\n\ndef customers():\n    if CACHE.exists() and CACHE.stat().st_mtime > RAW.stat().st_mtime:\n        return pd.read_parquet(CACHE)\n    df = _clean(pd.read_csv(RAW))\n    df.to_parquet(CACHE)\n    return df", k.cache))
	k.w.respond(text("churn.load now caches the cleaned frame."))
	k.fact(Fact{Category: CatExtraction, Kind: "decision", Question: "Where is the cleaned data cached?", Expect: []string{k.cache}})
	k.probe(Probe{Kind: ProbeDecision, Question: "What did the agent decide for the slow first cell, and why?", Expect: []string{k.cache}, Why: []string{"dtypes", "CSV parse"}})
}

func (k *notebookWork) runModel() {
	k.w.prompt("run 03_model end to end with papermill so we have numbers to compare against after the refactor")
	out := k.longLog(90+k.r.IntN(90), func(i int) string {
		return fmt.Sprintf("Executing:  %d%%|%s| %d/%d [%02d:%02d<%02d:%02d, %d.%02dcell/s]", i%100, strings.Repeat("#", i%10), i%60, 60, i/60, i%60, 1, i%60, 1+i%4, i%99)
	}, "[I 11:42:03] Executing notebook with kernel: python3", fmt.Sprintf("holdout ROC AUC: %s", k.auc), fmt.Sprintf("holdout PR AUC: %s", k.prAU))
	k.w.bash(nil, "papermill notebooks/03_model.ipynb /tmp/03_model.out.ipynb -p sample_frac 1.0 --log-output", "Execute 03_model", out, 0)
	k.w.respond(text("It ran to the end on a fresh kernel; those are the reference numbers."))
	k.fact(Fact{Category: CatExtraction, Kind: "result", Question: "What holdout ROC AUC did the reference run of 03_model give?", Expect: []string{k.auc}})
	k.probe(Probe{Kind: ProbeRecall, Question: "What holdout PR AUC did the reference run give?", Expect: []string{k.prAU}})
}

func (k *notebookWork) keyError() {
	k.w.prompt("now point 01_explore at churn.load and rerun it")
	k.notebookEdit(nil, "notebooks/01_explore.ipynb", "c02", "from churn.load import customers\ndf = customers()")
	k.w.bash(nil, "papermill notebooks/01_explore.ipynb /tmp/01.out.ipynb", "Execute 01_explore", fmt.Sprintf("Executing:  40%%|####      | 8/20\n---------------------------------------------------------------------------\nPapermillExecutionError: \n---------------------------------------------------------------------------\nException encountered at \"In [5]\":\nKeyError: '%s'", k.errCol[0]), 1)
	k.w.respond(text(fmt.Sprintf("The notebook still uses the old column name; churn.load renames %s to %s.", k.errCol[0], k.errCol[1])))
	k.notebookEdit(nil, "notebooks/01_explore.ipynb", "c05", fmt.Sprintf("df.groupby(df[%q].dt.to_period('M')).size().plot()", k.errCol[1]))
	k.w.bash(nil, "papermill notebooks/01_explore.ipynb /tmp/01.out.ipynb", "Execute 01_explore", "Executing: 100%|##########| 20/20", 0)
	k.w.respond(text("01_explore runs clean now."))
	k.fact(Fact{Category: CatErrorsFixes, Kind: "error", Question: "Which error did rerunning 01_explore hit, and what fixed it?", Expect: []string{"KeyError: '" + k.errCol[0] + "'", k.errCol[1]}})
}

func (k *notebookWork) impute() {
	k.w.prompt("about 3% of rows have no monthly_charges. what do we do with them?")
	k.w.respond(text("I'll fill them with the median of their plan so the rows stay in the training set: the median is robust to the few enterprise outliers."))
	k.w.edit(nil, "src/churn/features.py", "def split_by_date(df):", "def fill_charges(df):\n    df[\"monthly_charges\"] = df.groupby(\"plan\")[\"monthly_charges\"].transform(lambda s: s.fillna(s.median()))\n    return df\n\n\ndef split_by_date(df):")
}

func (k *notebookWork) reorganize() {
	k.w.prompt(fmt.Sprintf("tidy the notebooks folder: Untitled1 is actually the segmentation work, give it a real name; scratch_old.ipynb can go; and write the trained model to %s from now on.", k.modelOld))
	k.w.bash(nil, "git mv notebooks/Untitled1.ipynb "+k.segNB, "Rename the segmentation notebook", "", 0)
	k.w.bash(nil, "git rm -q notebooks/scratch_old.ipynb && rm -rf notebooks/.ipynb_checkpoints", "Delete the scratch notebook", "", 0)
	k.w.bash(nil, "printf '*.ipynb filter=nbstripout\\n' >> .gitattributes && nbstripout --install --attributes .gitattributes", "Strip outputs on commit", "", 0)
	k.w.create(nil, "src/churn/persist.py", fmt.Sprintf("\"\"\"Where trained models go.\"\"\"\nfrom pathlib import Path\n\nimport joblib\n\nMODEL = Path(%q)\n\n\ndef save(model):\n    MODEL.parent.mkdir(parents=True, exist_ok=True)\n    joblib.dump(model, MODEL)\n", k.modelOld))
	k.notebookEdit(nil, "notebooks/03_model.ipynb", "c14", "from churn.persist import save\nsave(model)")
	k.w.respond(text(fmt.Sprintf("Renamed Untitled1 to %s, deleted scratch_old.ipynb, outputs are stripped on commit, and 03_model saves through churn.persist.", k.segNB)))
	k.fact(Fact{Category: CatExtraction, Kind: "path", Question: "What was notebooks/Untitled1.ipynb renamed to?", Expect: []string{k.segNB}})
}

func (k *notebookWork) temporal() {
	k.w.prompt(fmt.Sprintf("in 03 add %s", k.ask1))
	k.notebookEdit(nil, "notebooks/03_model.ipynb", "c18", fmt.Sprintf("# %s\nfig = plots.evaluation(model, X_test, y_test)\nplots.save(fig)", k.ask1))
	k.w.respond(text("Added at the end of 03."))
	k.w.prompt(fmt.Sprintf("then %s after it", k.ask2))
	k.notebookEdit(nil, "notebooks/03_model.ipynb", "c19", fmt.Sprintf("# %s\nfig = plots.explain(model, X_test)\nplots.save(fig)", k.ask2))
	k.w.respond(text("Done, both save through plots.save."))
	k.fact(Fact{Category: CatTemporal, Kind: "order", Question: fmt.Sprintf("What did the user ask for right after %s?", k.ask1), Expect: []string{k.ask2}, After: k.ask1})
}

func (k *notebookWork) frameSize() {
	k.w.prompt("how big is the cleaned frame now, after the filters?")
	k.w.bash(nil, "python -c 'import churn.load as l; df = l.customers(); df.info()'", "Inspect the cleaned frame", fmt.Sprintf("<class 'pandas.core.frame.DataFrame'>\nRangeIndex: %d entries, 0 to %d\nData columns (total 37 columns):\n%smemory usage: %d.%d MB", k.rows, k.rows-1, k.longLog(37, func(i int) string {
		return fmt.Sprintf(" %2d  %s_%s  %d non-null  float64", i, k.fw(), k.fw(), k.rows-k.r.IntN(900))
	}), 10+k.r.IntN(40), k.r.IntN(10)), 0)
	k.w.respond(text("37 columns; the row count is in the output above."))
	k.probe(Probe{Kind: ProbeRecall, Question: "How many rows does the cleaned frame have?", Expect: []string{fmt.Sprintf("%d entries", k.rows)}})
}

func (k *notebookWork) bins() {
	k.w.prompt("pytest is red on CI since this morning")
	k.w.bash(nil, "pytest -q tests/test_features.py", "Run the feature tests", fmt.Sprintf("..F....\n=================================== FAILURES ===================================\n_______________________________ %s _______________________________\n\n    def %s():\n>       assert features.tenure_bucket(df).nunique() == 10\nE       AssertionError: assert %d == 10\n\ntests/test_features.py:41: AssertionError\nFAILED tests/test_features.py::%s - AssertionError: assert %d == 10\n1 failed, 6 passed in 2.31s", k.failTst, k.failTst, k.binsBad, k.failTst, k.binsBad), 1)
	k.w.bash(nil, fmt.Sprintf("sed -i 's/bins=%d/bins=10/' src/churn/features.py && pytest -q tests/test_features.py", k.binsBad), "Fix the bucket count", ".......\n7 passed in 2.02s", 0)
	k.w.respond(text("The bucketing had the wrong number of bins after the merge; fixed in features.py."))
	k.fact(Fact{Category: CatErrorsFixes, Kind: "test_failure", Question: "Which test failed on CI, and what fixed it?", Expect: []string{k.failTst, "bins=10"}})
}

func (k *notebookWork) renameModel() {
	k.w.prompt(fmt.Sprintf("the deploy job globs models/churn-*.joblib, so the model has to be %s, not what we said before", k.modelNew))
	k.w.bash(nil, fmt.Sprintf("mv %s %s", k.modelOld, k.modelNew), "Rename the saved model", "", 0)
	k.w.edit(nil, "src/churn/persist.py", fmt.Sprintf("MODEL = Path(%q)", k.modelOld), fmt.Sprintf("MODEL = Path(%q)", k.modelNew))
	k.w.respond(text(fmt.Sprintf("Moved the file and churn.persist writes %s now.", k.modelNew)))
	k.fact(Fact{Category: CatKnowledgeUpdate, Kind: "path", Question: "Where is the trained model saved?", Expect: []string{k.modelNew}, Superseded: []string{k.modelOld}})
}

func (k *notebookWork) reverseImpute() {
	k.w.prompt("talked to finance: the rows without monthly_charges are test accounts. don't fill them in, drop them")
	k.w.edit(nil, "src/churn/features.py", "def fill_charges(df):", "def drop_test_accounts(df):\n    return df.dropna(subset=[\"monthly_charges\"])\n\n\ndef _unused_fill_charges(df):")
	k.w.bash(nil, "pytest -q", "Run the tests", k.testOutput(pythonLang), 0)
	k.w.respond(text("Rows without monthly_charges are now dropped by drop_test_accounts, since they are test accounts; the tests pass."))
	k.probe(Probe{Kind: ProbeDecision, Question: "What happens to rows without monthly_charges, and why?", Expect: []string{"drop_test_accounts"}, Why: []string{"test accounts"}, Superseded: []string{"median of their plan"}})
}

func (k *notebookWork) latest() {
	req := fmt.Sprintf("Now turn 03_model into a script, src/churn/train.py, that takes --cutoff and --sample-frac and writes the figures to %s/; the notebook should just call train.main() and show the figures. Keep random_state=%d.", k.figs, k.seed)
	k.w.prompt(req)
	k.fact(Fact{Category: CatLatestRequest, Kind: "verbatim", Question: "What is the user's latest request, word for word?", Expect: []string{req}, Verbatim: true})
	k.todo("Write src/churn/train.py from 03_model's cells", "Replace the training cells with train.main()", "Rerun 03 with papermill")
	k.w.create(nil, "src/churn/train.py", fmt.Sprintf("\"\"\"Train the churn model (from notebooks/03_model.ipynb).\"\"\"\nimport argparse\n\nfrom xgboost import XGBClassifier\n\nfrom churn import features, load, persist, plots\n\n\ndef main(argv=None):\n    p = argparse.ArgumentParser()\n    p.add_argument(\"--cutoff\")\n    p.add_argument(\"--sample-frac\", type=float, default=1.0)\n    a = p.parse_args(argv)\n    train, test = features.split_by_date(load.customers())\n    model = XGBClassifier(n_estimators=400, random_state=%d)\n    model.fit(train.X, train.y, early_stopping_rounds=30, eval_set=[(test.X, test.y)])\n    persist.save(model)\n", k.seed))
	k.w.bash(nil, "python -m churn.train --cutoff "+k.cutNew+" --sample-frac 0.1", "Try the script", "Traceback (most recent call last):\n  File \"src/churn/train.py\", line 16, in main\n    model.fit(train.X, train.y, early_stopping_rounds=30, eval_set=[(test.X, test.y)])\nTypeError: XGBModel.fit() got an unexpected keyword argument 'early_stopping_rounds'", 1)
	k.w.respond(text("xgboost 2 takes early_stopping_rounds in the constructor now. Next: move early_stopping_rounds into XGBClassifier(...), rerun the script, then replace 03's training cells with train.main()."))
	k.probe(Probe{Kind: ProbeContinuation, Question: "What was the agent doing when the session was compacted, and what is its next step?", Expect: []string{"src/churn/train.py"}, Next: []string{"early_stopping_rounds", "XGBClassifier", "train.main()"}})
}

func (k *notebookWork) abstentions() []abstention {
	return []abstention{
		{"Which experiment tracker did the user ask to log runs to?", []string{"mlflow", "wandb", "weights & biases", "neptune"}},
		{"Which BI tool will show the churn dashboard?", []string{"tableau", "looker", "superset", "metabase"}},
		{"Which GPU instance was requested for training?", []string{"a100", "p3.2xlarge", "g5.xlarge", "t4"}},
	}
}
