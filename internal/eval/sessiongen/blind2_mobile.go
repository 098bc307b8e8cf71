package sessiongen

import (
	"fmt"
	"strings"
)

// mobileWork cuts a release of an Android app with Gradle and fastlane:
// version bumps, a crash fix, release notes, a size check and the upload.
type mobileWork struct {
	*bgen
	pool     *fillerPool
	version  string
	codeOld  int
	codeNew  int
	flagPfx  string
	payload  string
	size     string
	okhttp   string
	notes    string
	tagOld   string
	tagNew   string
	ask1     string
	ask2     string
	failTst  string
	lifecycl string
}

func newMobileWork(b *bgen) work {
	minor := b.between(4, 19)
	k := &mobileWork{bgen: b, version: fmt.Sprintf("3.%d.0", minor)}
	k.codeOld = 30000 + minor*100 + b.between(10, 40)
	k.codeNew = k.codeOld + 1
	k.flagPfx = "ff_" + b.word() + "_"
	k.payload = camel(b.word()) + "Payload"
	k.size = fmt.Sprintf("%d.%02d MB", b.between(18, 24), b.r.IntN(99))
	k.okhttp = fmt.Sprintf("4.12.%d", b.between(1, 9))
	k.notes = fmt.Sprintf("fastlane/metadata/android/en-US/changelogs/%d.txt", k.codeNew)
	k.tagOld, k.tagNew = "v"+k.version, "trailmate-"+k.version
	k.ask1 = pick(b, "the Play screenshots for the new map screen", "the onboarding screenshots", "the tablet screenshots")
	k.ask2 = pick(b, "targetSdk 35", "the Material 3 date picker", "edge-to-edge on the settings screen")
	k.failTst = "formats" + camel(b.word()) + "PriceWithComma"
	k.lifecycl = fmt.Sprintf("2.8.%d", b.between(1, 7))
	k.pool = b.newPool(kotlinLang, "app/src/main/java/app/trailmate/map/MapViewModel.kt", "app/src/main/java/app/trailmate/sync/SyncWorker.kt",
		"app/src/main/java/app/trailmate/checkout/CheckoutViewModel.kt", "app/src/main/java/app/trailmate/ui/PriceFormatter.kt", "app/src/main/java/app/trailmate/legacy/OldOnboardingActivity.kt")
	b.summary = "1. Primary request: cut the " + k.version + " release of the Trailmate Android app.\n" +
		"2. Work so far: the app modules were read and tidied; the unit tests pass.\n3. Continue with the user's most recent request."
	return k
}

func (k *mobileWork) project() (string, string, string) {
	return "trailmate-android", "/Users/jo/src/trailmate-android", "release/" + k.version
}

func (k *mobileWork) filler() { k.fillerTurn(k.pool) }

func (k *mobileWork) first() {
	k.w.prompt(fmt.Sprintf("We're cutting %s of the Android app today. The release branch is already cut; what's left is the version bump, the two crashers from the beta, release notes in en-US and de-DE, and the upload. Have a look at app/build.gradle.kts and the Fastfile first. Ground rule for today: uploads go to the internal track only, with `bundle exec fastlane internal` — never run the production or beta lanes, product promotes from the Play console themselves and they will be very unhappy if a build skips QA.", k.version))
	k.w.read(nil, "app/build.gradle.kts", "plugins {\n    id(\"com.android.application\")\n    kotlin(\"android\")\n}\n\nandroid {\n    namespace = \"app.trailmate\"\n    defaultConfig {\n        minSdk = 24\n        targetSdk = 34\n        versionCode = "+fmt.Sprint(k.codeOld-1)+"\n        versionName = \"3.x-dev\"\n    }\n    buildTypes {\n        release { isMinifyEnabled = true; proguardFiles(\"proguard-rules.pro\") }\n    }\n}\n")
	k.w.read(nil, "fastlane/Fastfile", "default_platform(:android)\n\nplatform :android do\n  lane :internal do\n    gradle(task: \"bundle\", build_type: \"Release\")\n    upload_to_play_store(track: \"internal\")\n  end\n\n  lane :beta do\n    upload_to_play_store(track: \"beta\")\n  end\n\n  lane :production do\n    upload_to_play_store(track: \"production\", rollout: \"0.2\")\n  end\nend\n")
	k.w.respond(text("build.gradle.kts still has the dev versionName; the Fastfile has internal, beta and production lanes. I'll do the bump first, then the crashes."))
	k.fact(Fact{Category: CatExtraction, Kind: "instruction", Question: "Which command may upload builds today?", Expect: []string{"bundle exec fastlane internal"}})
}

func (k *mobileWork) beats() []beat {
	return []beat{
		{0.05, k.passingPreference}, {0.11, k.bump}, {0.18, k.r8Decision}, {0.27, k.bundleSize},
		{0.36, k.unresolved}, {0.45, k.minSdk}, {0.52, k.releaseFiles}, {0.60, k.temporal},
		{0.68, k.okhttpVersion}, {0.76, k.priceTest}, {0.84, k.retag}, {0.90, k.reverseMinSdk},
	}
}

func (k *mobileWork) passingPreference() {
	k.w.prompt(fmt.Sprintf("The second crasher is the sync one, and I think it's the feature-flag plumbing again: the remote config keys and the local defaults got out of sync when someone renamed the flags last sprint, and SyncWorker reads a key that doesn't exist any more and falls through to a null. Anything new you add as a flag, prefix it %s, that's the convention the web and iOS teams use too, so the dashboards group them. Can you grep for every flag key the app reads and compare it with res/xml/remote_config_defaults.xml?", k.flagPfx))
	var out strings.Builder
	for i := 0; i < 25+k.r.IntN(25); i++ {
		f := k.pool.files[k.r.IntN(len(k.pool.files))]
		fmt.Fprintf(&out, "%s:%d:        val %s = remoteConfig.getBoolean(\"%s_%s\")\n", f.path, 10+k.r.IntN(400), k.fw(), k.fw(), k.fw())
	}
	k.w.grep(nil, `remoteConfig\.get(Boolean|String|Long)\(`, out.String())
	k.w.respond(text("Three keys the code reads are missing from remote_config_defaults.xml, all in SyncWorker; that's the null."))
	k.fact(Fact{Category: CatExtraction, Kind: "preference", Question: "What prefix must new feature flags use?", Expect: []string{k.flagPfx}})
}

func (k *mobileWork) bump() {
	k.w.prompt(fmt.Sprintf("bump it: versionName %s, versionCode %d — no wait, %d, the hotfix beta already used the other one", k.version, k.codeOld, k.codeNew))
	k.multiEdit(nil, "app/build.gradle.kts", fmt.Sprintf("versionCode = %d", k.codeOld-1), fmt.Sprintf("versionCode = %d", k.codeNew), "versionName = \"3.x-dev\"", fmt.Sprintf("versionName = %q", k.version))
	k.w.respond(text(fmt.Sprintf("Bumped to %s (%d).", k.version, k.codeNew)))
	k.fact(Fact{Category: CatKnowledgeUpdate, Kind: "value", Question: "What versionCode does the release use?", Expect: []string{fmt.Sprint(k.codeNew)}, Superseded: []string{fmt.Sprint(k.codeOld)}})
}

func (k *mobileWork) r8Decision() {
	k.w.prompt("first crasher: the release build dies on startup on some devices, debug is fine. logcat from QA's phone is in qa/logcat-startup.txt")
	out := k.longLog(60+k.r.IntN(60), func(i int) string {
		return fmt.Sprintf("02-11 10:%02d:%02d.%03d  %d  %d I %s: %s %s", i%60, i%60, k.r.IntN(999), 4000+i, 4100+i, camel(k.fw()), k.fw(), k.fw())
	}, fmt.Sprintf("02-11 10:59:59.120  4213  4213 E AndroidRuntime: java.lang.IllegalArgumentException: Cannot serialize Kotlin type app.trailmate.sync.%s. Reflective serialization of Kotlin classes without using kotlin-reflect has undefined and unexpected behavior.", k.payload),
		"02-11 10:59:59.121  4213  4213 E AndroidRuntime: \tat com.squareup.moshi.ClassJsonAdapter$1.create(ClassJsonAdapter.java:97)")
	k.w.bash(nil, "cat qa/logcat-startup.txt", "Read QA's logcat", out, 0)
	k.w.respond(text(fmt.Sprintf("R8 strips the Moshi-generated adapter for %s in release, so Moshi falls back to reflection. I'd add a keep rule for the @JsonClass generated adapters in proguard-rules.pro rather than turn minification off: minification saves about 4 MB of the bundle and keeps us under the dex method limit. OK?", k.payload)))
	k.w.prompt("yes")
	k.w.bash(nil, "printf -- '-keep class **JsonAdapter { *; }\\n-keepnames @com.squareup.moshi.JsonClass class *\\n' >> app/proguard-rules.pro", "Add the keep rule", "", 0)
	k.w.respond(text("Keep rule added."))
	k.fact(Fact{Category: CatExtraction, Kind: "decision", Question: "How was the release startup crash to be fixed?", Expect: []string{"keep rule", "JsonClass"}})
	k.probe(Probe{Kind: ProbeRecall, Question: "Which class did Moshi fail to serialize in the startup crash?", Expect: []string{k.payload}})
	k.probe(Probe{Kind: ProbeDecision, Question: "What did the agent choose for the R8 crash instead of turning minification off, and why?", Expect: []string{"keep rule"}, Why: []string{"4 MB", "method limit"}})
}

func (k *mobileWork) bundleSize() {
	k.w.prompt("build the release bundle and check we're still under the size budget")
	out := k.longLog(100+k.r.IntN(80), func(i int) string {
		return fmt.Sprintf("> Task :%s:%s%s%s", pick(k.bgen, "app", "core", "map", "sync"), pick(k.bgen, "compile", "merge", "process", "minify"), camel(k.fw()), pick(k.bgen, "Release", "ReleaseResources", "ReleaseKotlin", " UP-TO-DATE"))
	}, "", "> Task :app:printAabSize", fmt.Sprintf("app-release.aab: %s (budget 25.00 MB)", k.size))
	k.w.bash(nil, "./gradlew :app:bundleRelease :app:printAabSize", "Build the release bundle", out, 0)
	k.w.respond(text("The bundle builds with the keep rule and is under budget."))
	k.fact(Fact{Category: CatExtraction, Kind: "result", Question: "How big is the release bundle?", Expect: []string{k.size}})
}

func (k *mobileWork) unresolved() {
	k.w.prompt("the checkout screen should stop collecting when it's in the background, use the lifecycle-aware collector")
	k.w.edit(nil, "app/src/main/java/app/trailmate/checkout/CheckoutViewModel.kt", "val state by viewModel.state.collectAsState()", "val state by viewModel.state.collectAsStateWithLifecycle()")
	k.w.bash(nil, "./gradlew :app:compileReleaseKotlin", "Compile", fmt.Sprintf("> Task :app:compileReleaseKotlin FAILED\ne: file://%s/app/src/main/java/app/trailmate/checkout/CheckoutViewModel.kt:%d:40 Unresolved reference: collectAsStateWithLifecycle\n\nFAILURE: Build failed with an exception.", k.w.cwd, k.between(40, 200)), 1)
	k.w.edit([]part{text("That extension lives in lifecycle-runtime-compose, which the app module doesn't depend on yet.")}, "app/build.gradle.kts", "dependencies {", fmt.Sprintf("dependencies {\n    implementation(\"androidx.lifecycle:lifecycle-runtime-compose:%s\")", k.lifecycl))
	k.w.bash(nil, "./gradlew :app:compileReleaseKotlin", "Compile", "BUILD SUCCESSFUL in 48s", 0)
	k.w.respond(text("Compiles now."))
	k.fact(Fact{Category: CatErrorsFixes, Kind: "build_error", Question: "What broke the compile of the checkout screen, and what fixed it?", Expect: []string{"Unresolved reference: collectAsStateWithLifecycle", "lifecycle-runtime-compose"}})
}

func (k *mobileWork) minSdk() {
	k.w.prompt("do we keep minSdk where it is for this release?")
	k.w.respond(text("Yes: I'd keep minSdk = 24 for this release, Play's device catalog still shows a few percent of our installs on Android 7 and a release branch is the wrong place to drop them."))
}

func (k *mobileWork) releaseFiles() {
	k.w.prompt("release notes next. the default.txt changelog should become the versioned one, the old onboarding activity is dead code since 3.2 so delete it, and copy the notes to de-DE so translators have a file to edit")
	dir := "fastlane/metadata/android/en-US/changelogs/"
	k.w.bash(nil, fmt.Sprintf("git mv %sdefault.txt %s", dir, k.notes), "Version the changelog", "", 0)
	k.w.bash(nil, fmt.Sprintf("cat > %s <<'EOF'\n• Offline maps load faster\n• Fixed a crash on startup on some devices\n• Prices show in your local format\nEOF", k.notes), "Write the release notes", "", 0)
	k.w.bash(nil, fmt.Sprintf("mkdir -p fastlane/metadata/android/de-DE/changelogs && cp %s fastlane/metadata/android/de-DE/changelogs/%d.txt", k.notes, k.codeNew), "Copy for de-DE", "", 0)
	k.w.bash(nil, "git rm -q app/src/main/java/app/trailmate/legacy/OldOnboardingActivity.kt", "Delete the old onboarding", "", 0)
	k.pool.remove("app/src/main/java/app/trailmate/legacy/OldOnboardingActivity.kt")
	k.w.edit(nil, "app/src/main/AndroidManifest.xml", "        <activity android:name=\".legacy.OldOnboardingActivity\" />\n", "")
	k.w.create(nil, "CHANGELOG.md", fmt.Sprintf("# Changelog\n\n## %s (%d)\n\n- Offline maps load faster\n- Fixed a startup crash in release builds (R8 and Moshi adapters)\n- Prices use the device locale\n", k.version, k.codeNew))
	k.w.respond(text(fmt.Sprintf("The en-US notes are in %s, copied to de-DE, the old onboarding activity is gone, and CHANGELOG.md has the entry. Tag it %s when you're happy?", k.notes, k.tagOld)))
	k.w.prompt("yes")
	k.w.bash(nil, "git tag -a "+k.tagOld+" -m 'Release "+k.version+"'", "Tag the release", "", 0)
	k.probe(Probe{Kind: ProbeRecall, Question: "Which file holds the en-US release notes for Play?", Expect: []string{k.notes}})
}

func (k *mobileWork) temporal() {
	k.w.prompt(fmt.Sprintf("can you also refresh %s", k.ask1))
	k.w.bash(nil, "bundle exec fastlane screengrab --locales en-US,de-DE", "Capture screenshots", "[screengrab] Captured 6 screenshots for en-US\n[screengrab] Captured 6 screenshots for de-DE", 0)
	k.w.respond(text("Screenshots refreshed for both locales."))
	k.w.prompt(fmt.Sprintf("after that, %s", k.ask2))
	k.w.edit(nil, "app/build.gradle.kts", "targetSdk = 34", "targetSdk = 34 // "+k.ask2)
	k.w.respond(text("Done."))
	k.fact(Fact{Category: CatTemporal, Kind: "order", Question: fmt.Sprintf("What did the user ask for right after %s?", k.ask1), Expect: []string{k.ask2}, After: k.ask1})
}

func (k *mobileWork) okhttpVersion() {
	k.w.prompt("which okhttp does the release classpath actually get? security asked")
	var out strings.Builder
	for i := 0; i < 30+k.r.IntN(30); i++ {
		fmt.Fprintf(&out, "|    +--- androidx.%s:%s-%s:1.%d.%d\n", k.fw(), k.fw(), k.fw(), k.r.IntN(12), k.r.IntN(9))
		if i == 12 {
			fmt.Fprintf(&out, "+--- com.squareup.retrofit2:retrofit:2.11.0\n|    \\--- com.squareup.okhttp3:okhttp:4.11.0 -> %s\n", k.okhttp)
		}
	}
	k.w.bash(nil, "./gradlew :app:dependencies --configuration releaseRuntimeClasspath", "Show the release classpath", out.String(), 0)
	k.w.respond(text("Retrofit asks for an older okhttp, but the resolved version is the one after the arrow above, which has the fix security cares about."))
	k.probe(Probe{Kind: ProbeRecall, Question: "Which okhttp version does the release classpath resolve to?", Expect: []string{k.okhttp}})
}

func (k *mobileWork) priceTest() {
	k.w.prompt("unit tests please before we upload anything")
	k.w.bash(nil, "./gradlew testReleaseUnitTest", "Run the unit tests", fmt.Sprintf("PriceFormatterTest > %s() FAILED\n    org.junit.ComparisonFailure: expected:<12[,]50 €> but was:<12[.]50 €>\n        at app.trailmate.ui.PriceFormatterTest.%s(PriceFormatterTest.kt:22)\n\n42 tests completed, 1 failed\n\nFAILURE: Build failed with an exception.", k.failTst, k.failTst), 1)
	k.w.bash(nil, "sed -i 's/Locale.US/Locale.getDefault()/' app/src/main/java/app/trailmate/ui/PriceFormatter.kt && ./gradlew testReleaseUnitTest", "Format with the device locale", "BUILD SUCCESSFUL in 1m 3s", 0)
	k.w.respond(text("PriceFormatter hard-coded the US locale; it uses the device's now and the tests pass."))
	k.fact(Fact{Category: CatErrorsFixes, Kind: "test_failure", Question: "Which unit test failed, and what fixed it?", Expect: []string{k.failTst, "Locale.getDefault()"}})
}

func (k *mobileWork) retag() {
	k.w.prompt(fmt.Sprintf("iOS lives in this repo's sibling now and shares the tag namespace, so the tag has to be %s. fix it", k.tagNew))
	k.w.bash(nil, fmt.Sprintf("git tag -d %s && git tag -a %s -m 'Release %s'", k.tagOld, k.tagNew, k.version), "Retag the release", "Deleted tag '"+k.tagOld+"' (was 4f1c2ab)", 0)
	k.w.respond(text("Retagged as " + k.tagNew + "."))
	k.fact(Fact{Category: CatKnowledgeUpdate, Kind: "value", Question: "What is the release's git tag?", Expect: []string{k.tagNew}, Superseded: []string{k.tagOld}})
}

func (k *mobileWork) reverseMinSdk() {
	k.w.prompt("Change of mind on minSdk: the console says under 1.5% of active installs are below 26 and raising it lets us drop core library desugaring, which is half our build time. Raise it to 26 in this release.")
	k.w.edit(nil, "app/build.gradle.kts", "minSdk = 24", "minSdk = 26")
	k.w.bash(nil, "./gradlew :app:bundleRelease", "Build", "BUILD SUCCESSFUL in 2m 31s", 0)
	k.w.respond(text("minSdk = 26 now, desugaring is off and the release bundle builds."))
	k.probe(Probe{Kind: ProbeDecision, Question: "What minSdk does the release use, and why?", Expect: []string{"minSdk = 26"}, Why: []string{"desugaring", "1.5%"}, Superseded: []string{"minSdk = 24"}})
}

func (k *mobileWork) latest() {
	req := fmt.Sprintf("Now run the internal lane for %s and, once it's up, draft the Play \"What's new\" text for en-US and de-DE from CHANGELOG.md, each under 500 characters.", k.version)
	k.w.prompt(req)
	k.fact(Fact{Category: CatLatestRequest, Kind: "verbatim", Question: "What is the user's latest request, word for word?", Expect: []string{req}, Verbatim: true})
	k.todo("Run bundle exec fastlane internal", "Draft en-US What's new", "Draft de-DE What's new")
	k.w.bash(nil, "bundle exec fastlane internal", "Upload to the internal track", fmt.Sprintf("[11:58:02]: ------------------------------\n[11:58:02]: --- Step: upload_to_play_store ---\n[11:58:02]: ------------------------------\n[11:58:40]: Preparing to upload for language 'de-DE'...\n[11:58:41]: Google Api Error: Invalid request - Release notes for de-DE are too long: 534 characters, the limit is 500.\n[11:58:41]: fastlane finished with errors\n[!] Google Api Error: Invalid request - Release notes for de-DE are too long (changelogs/%d.txt)", k.codeNew), 1)
	k.w.respond(text(fmt.Sprintf("The upload was refused: the de-DE changelog for %d is over the 500-character limit. Next I'll shorten fastlane/metadata/android/de-DE/changelogs/%d.txt, rerun bundle exec fastlane internal, and then draft the What's new texts.", k.codeNew, k.codeNew)))
	k.probe(Probe{Kind: ProbeContinuation, Question: "What was the agent doing when the session was compacted, and what is its next step?", Expect: []string{"bundle exec fastlane internal", k.version}, Next: []string{fmt.Sprintf("de-DE/changelogs/%d.txt", k.codeNew), "500"}})
}

func (k *mobileWork) abstentions() []abstention {
	return []abstention{
		{"Which crash reporting SDK did the user ask to add?", []string{"crashlytics", "sentry", "bugsnag", "instabug"}},
		{"Which A/B testing service was chosen?", []string{"optimizely", "launchdarkly", "statsig"}},
		{"Which iOS version was the release asked to support?", []string{"ios 16", "ios 17", "ios 18"}},
	}
}
