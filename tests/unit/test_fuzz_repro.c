/* test_fuzz_repro: every input in tests/fixtures/fuzz/ once made a fuzzer (fuzz/) crash, hang or
 * leak; each is replayed through the same target function (fuzz/targets.c, included here) and must
 * now return cleanly: files named TARGET-refused-* must be refused with a one-line error, files
 * named TARGET-ok-* accepted. The sanitizer run of tests/run.sh replays them under ASan+UBSan.
 * Also replays the committed fixtures and a few fixed inputs through every target. */
#include "check.h"
#include "../../fuzz/targets.c"

#include <dirent.h>

static const char *const targets[] = {"container", "gpt", "transformer", "rnn", "bahdanau", "vocab",
                                      "text", "tsv", "parallel", "lmdata", "bpe", "safetensors",
                                      "unigram", "gpt2bpe", "hfconfig"};
#define N_TARGETS (int)(sizeof targets / sizeof *targets)

static void replay_reproducers(void) {
    DIR *d = opendir("tests/fixtures/fuzz");
    int n = 0;
    struct dirent *de;
    while (d && (de = readdir(d))) {
        char target[64], want[16];
        if (sscanf(de->d_name, "%63[a-z0-9]-%15[a-z]-", target, want) != 2) continue;
        char p[600];
        snprintf(p, sizeof p, "tests/fixtures/fuzz/%s", de->d_name);
        size_t len = 0;
        unsigned char *b = check_read_file(p, &len);
        if (!b) continue;
        int accepted = tfm_fuzz_run(target, b, len);
        free(b);
        int want_ok = !strcmp(want, "ok");
        const char *err = tfm_last_error();
        char label[700];
        snprintf(label, sizeof label, "fuzz reproducer %s %s", de->d_name, want_ok ? "accepted" : "refused cleanly");
        CHECK(label, want_ok ? accepted == 1 : (accepted == 0 && err[0] && !strchr(err, '\n')),
              "accepted=%d err='%s'", accepted, err);
        if (!want_ok && !accepted) printf("#   %s\n", err);
        n++;
    }
    if (d) closedir(d);
    printf("# %d reproducers\n", n);
}

static void replay_fixed_inputs(void) {
    const char *fixtures[] = {"tests/fixtures/gpt_small.tfm", "tests/fixtures/transformer_small.tfm",
                              "tests/fixtures/rnn_small.tfm", "tests/fixtures/bahdanau_small.tfm"};
    int accepted = 0;
    for (int i = 0; i < 4; i++) {
        size_t len = 0;
        unsigned char *b = check_read_file(fixtures[i], &len);
        if (!b) continue;
        accepted += tfm_fuzz_run("container", b, len);
        for (int t = 1; t < 5; t++) tfm_fuzz_run(targets[t], b, len);   /* parity fixtures: not checkpoints */
        free(b);
    }
    CHECK("committed fixtures pass the container target", accepted == 4, "%d of 4", accepted);
    const unsigned char garbage[] = "TFMC\x02\0\0\0\x01\0\0\0\xff\xff";
    int any = 0;
    for (int t = 0; t < N_TARGETS; t++) {
        any += tfm_fuzz_run(targets[t], (const unsigned char *)"", 0);
        any += tfm_fuzz_run(targets[t], garbage, sizeof garbage - 1);
    }
    CHECK("empty and garbage inputs refused by every target", any == 0, "%d accepted", any);
    const char tsv[] = "Go.\tVa !\nHi.\tSalut !\n";
    CHECK("a small valid TSV accepted by the tsv target", tfm_fuzz_run("tsv", (const unsigned char *)tsv, sizeof tsv - 1) == 1,
          "%s", tfm_last_error());
}

int main(void) {
    replay_fixed_inputs();
    replay_reproducers();
    CHECK_EXIT();
}
