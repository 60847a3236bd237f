/* Peak resident set size of this process (getrusage), reported as one line on stderr. */
#ifndef TFM_CLI_RSS_H
#define TFM_CLI_RSS_H
/* Peak RSS in MiB. */
double cli_peak_rss_mib(void);
/* "tfm CMD: peak RSS N.N MiB" on stderr */
void cli_report_rss(const char *cmd);
#endif
