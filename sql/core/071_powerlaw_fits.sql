-- powerlaw_fits: the power-law fit of citation counts made by each graph run (grain: run_id).
-- Fitted with the `powerlaw` package (Clauset, Shalizi & Newman 2009): xmin chosen by minimising
-- the Kolmogorov-Smirnov distance, alpha by maximum likelihood, then a likelihood-ratio test
-- against a log-normal.
--   run_id              run_log.run_id of the graph run
--   created_at          when the fit was made
--   status              'ok', or 'too_few' when fewer than graph_powerlaw_min_n works have c >= 1
--                       (then every weight is 1)
--   n_works             works in the graph;  n_positive: works with c >= 1 (the fitted sample)
--   discrete            whether the discrete (integer) estimator was used (graph_powerlaw_discrete)
--   xmin, alpha, sigma  tail start, exponent and its standard error;  n_tail: works with c >= xmin
--   ks_d                Kolmogorov-Smirnov distance between the tail data and the fit
--   compared_to         the alternative distribution ('lognormal')
--   loglikelihood_ratio normalised log-likelihood ratio R (power law vs compared_to): R > 0 favours
--                       the power law, R < 0 the alternative
--   p_value             significance of the sign of R (small p: the sign can be trusted)
CREATE TABLE IF NOT EXISTS powerlaw_fits (
    run_id               VARCHAR PRIMARY KEY,
    created_at           TIMESTAMPTZ NOT NULL,
    status               VARCHAR NOT NULL,
    n_works              BIGINT NOT NULL,
    n_positive           BIGINT NOT NULL,
    discrete             BOOLEAN NOT NULL,
    xmin                 DOUBLE,
    alpha                DOUBLE,
    sigma                DOUBLE,
    n_tail               BIGINT,
    ks_d                 DOUBLE,
    compared_to          VARCHAR,
    loglikelihood_ratio  DOUBLE,
    p_value              DOUBLE
);
