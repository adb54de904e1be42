"""The cost model: what the pipeline costs a month, line by line, one module per AWS service.

- :mod:`.usage` what one delivery and one invocation consume (:class:`~.usage.Usage`), the
  traffic (:class:`~.usage.Scenario`) and what the services see of it (:class:`~.usage.Traffic`);
  :mod:`.bill` the bill's lines; :mod:`.units` the month and the GB; :mod:`.prices` the dated
  list-price table;
- one module per service computes its lines from those: :mod:`.api_gateway`, :mod:`.aws_lambda`,
  :mod:`.sqs`, :mod:`.dynamodb`, :mod:`.elasticache`, :mod:`.logs` (CloudWatch Logs),
  :mod:`.cloudwatch` (metrics, alarms, dashboard), :mod:`.xray`, :mod:`.s3` (claim checks),
  :mod:`.vpc` (interface endpoints), :mod:`.secrets_manager`;
- :mod:`.estimate` composes them into a bill, :mod:`.variants` changes the design;
- :mod:`.inputs` and :mod:`.template` read the measured usage (bench/results/cost_inputs.json),
  template.yaml and sources.toml.

``webhook-pipeline cost`` (:mod:`webhook_pipeline_ops.commands.cost`) prints the bills.
"""
