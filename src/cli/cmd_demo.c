/* tfm demo NAME: one command per experiment of the road to the Transformer.
 *   kernel-regression   d2l's Nadaraya-Watson attention pooling (non-parametric and learned width) */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "tfm/eval.h"
#include "tfm/road.h"

static int demo_kernel_regression(int argc, char **argv) {
    const char *out_dir = ".";
    int seed = 1, epochs = 5, threads = 0;
    float lr = 0.5f;
    cli_flag flags[] = {
        {"out-dir", FLAG_STR, &out_dir, "directory for kernel_regression_fit.svg and kernel_regression_attention.svg", 0},
        {"seed", FLAG_INT, &seed, "random seed of the data and of w's initial value", 0},
        {"epochs", FLAG_INT, &epochs, "SGD epochs of the parametric model, as in d2l", 0},
        {"lr", FLAG_FLOAT, &lr, "SGD learning rate, as in d2l", 0},
        {"threads", FLAG_INT, &threads, CLI_THREADS_HELP, 0},
    };
    cli_spec spec = {
        "demo kernel-regression", "[--out-dir DIR] [--seed S] [--epochs N] [--lr LR] [--threads N]",
        "Nadaraya-Watson kernel regression (d2l, attention pooling): 50 training inputs uniform in [0,5),\n"
        "y = 2 sin(x) + x^0.8 + N(0, 0.5); 50 test inputs 0, 0.1, ..., 4.9. Prints the test error of\n"
        "Gaussian-kernel pooling (w = 1) and of the parametric version whose width w is trained by SGD on\n"
        "the sum of squared errors (each training input attends to the other 49), and writes SVG plots of\n"
        "the fitted curves and of the attention weights.",
        flags, (int)(sizeof flags / sizeof flags[0]), 0, 0,
    };
    int n_pos;
    int rc = cli_parse(&spec, argc, argv, NULL, &n_pos);
    if (rc) return rc == 1 ? 0 : rc;
    if (epochs < 0 || epochs > 100000) return cli_error("demo", "--epochs must be in 0..100000");
    if (!(lr > 0)) return cli_error("demo", "--lr must be > 0");
    if (cli_check_threads("demo", threads)) return CLI_EXIT_USAGE;
    tfm_set_threads(threads);
    if ((rc = cli_make_dir("demo", "--out-dir", out_dir))) return rc;
    char fit[4200], att[4200];
    snprintf(fit, sizeof fit, "%s/kernel_regression_fit.svg", out_dir);
    snprintf(att, sizeof att, "%s/kernel_regression_attention.svg", out_dir);
    tfm_file_use files[] = {{"--out-dir", fit, TFM_FILE_OUT}, {"--out-dir", att, TFM_FILE_OUT}};
    if ((rc = cli_check_files("demo", files, 2))) return rc;

    tfm_kr_data d;
    tfm_kr_data_make(&d, 50, 50, (uint64_t)seed);
    int n = d.n_test, k = d.n_train;
    float *pred_np = malloc(sizeof(float) * n), *pred_p = malloc(sizeof(float) * n);
    float *w_np = malloc(sizeof(float) * n * k), *w_p = malloc(sizeof(float) * n * k);
    float *losses = malloc(sizeof(float) * (epochs + 1));
    if (!pred_np || !pred_p || !w_np || !w_p || !losses) {
        rc = cli_error("demo", "out of memory"), rc = CLI_EXIT_ERROR;
        goto done;
    }

    tfm_kr_predict(d.x_test, n, d.x_train, d.y_train, k, 1.0f, pred_np, w_np);
    double err_np = tfm_kr_mse(pred_np, d.y_truth, n);
    printf("non-parametric (w = 1): test MSE vs truth %.6f\n", err_np);
    float w = tfm_kr_train(&d, epochs, lr, (uint64_t)seed, losses);
    for (int e = 0; e < epochs; e++) printf("epoch %d, loss %.6f\n", e + 1, losses[e]);
    int diverged = !isfinite(w) || !tfm_all_finite(losses, (size_t)epochs);   /* plots of NaN would be empty */
    if (diverged) {
        rc = cli_error("demo", "--lr %g: the SGD diverged (learned w = %g): lower --lr", lr, w), rc = CLI_EXIT_ERROR;
        goto done;
    }
    tfm_kr_predict(d.x_test, n, d.x_train, d.y_train, k, w, pred_p, w_p);
    double err_p = tfm_kr_mse(pred_p, d.y_truth, n);
    printf("parametric (learned w = %.4f): test MSE vs truth %.6f\n", w, err_p);

    char path[4096];
    tfm_series s[4] = {
        {"Truth", d.x_test, d.y_truth, n, TFM_SERIES_LINE},
        {"Pred (non-parametric)", d.x_test, pred_np, n, TFM_SERIES_DASHED},
        {"Pred (parametric)", d.x_test, pred_p, n, TFM_SERIES_LINE},
        {"training data", d.x_train, d.y_train, k, TFM_SERIES_POINTS},
    };
    tfm_plot_opts po = {"Nadaraya-Watson kernel regression", "x", "y", 0, 0};
    snprintf(path, sizeof path, "%s/kernel_regression_fit.svg", out_dir);
    if (tfm_svg_lines(path, s, 4, &po)) {
        rc = cli_fail("demo", "%s", tfm_last_error());
        goto done;
    }
    printf("wrote %s\n", path);
    tfm_heatmap maps[2] = {{"non-parametric", n, k, w_np, NULL, NULL}, {"parametric", n, k, w_p, NULL, NULL}};
    tfm_heatmap_opts ho = {"attention weights", "Sorted training inputs", "Sorted testing inputs", 2, 0, 0, 0};
    snprintf(path, sizeof path, "%s/kernel_regression_attention.svg", out_dir);
    if (tfm_svg_heatmaps(path, maps, 2, &ho)) rc = cli_fail("demo", "%s", tfm_last_error());
    else printf("wrote %s\n", path);
done:
    free(pred_np);
    free(pred_p);
    free(w_np);
    free(w_p);
    free(losses);
    tfm_kr_data_free(&d);
    return rc;
}

int cmd_demo(int argc, char **argv) {
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        FILE *f = argc < 2 ? stderr : stdout;
        fprintf(f, "usage: tfm demo NAME [options]   (tfm demo NAME --help for details)\n\n"
                   "demos:\n  kernel-regression   Nadaraya-Watson attention pooling (d2l), SVG plots\n");
        return argc < 2 ? CLI_EXIT_USAGE : 0;
    }
    if (!strcmp(argv[1], "kernel-regression")) return demo_kernel_regression(argc - 1, argv + 1);
    fprintf(stderr, "tfm demo: unknown demo '%s' (kernel-regression)\n", argv[1]);
    return CLI_EXIT_USAGE;
}
