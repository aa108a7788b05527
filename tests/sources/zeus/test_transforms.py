import pytest
from same_rows import assert_same_rows

from tracelake.sources.zeus.transforms import time_energy_to_accuracy

pytestmark = pytest.mark.portable


def test_tta_and_eta_at_the_simulator_grain(spark):
    train = spark.createDataFrame(
        [("cifar100", "shufflenetv2", 1024, "adadelta", 0.1, 1, 0.5, 3.0),
         ("cifar100", "shufflenetv2", 1024, "adadelta", 0.1, 1, 0.9, None),   # never reached
         ("squad", "bert", 32, "adamw", 1e-5, 1, 84.0, 2.0)],                  # no power rows
        "dataset string, network string, batch_size int, optimizer string, learning_rate double, "
        "run int, target_metric double, target_epoch double")
    power = spark.createDataFrame(
        [("a40", "cifar100", "shufflenetv2", 1024, "adadelta", 100, 10.0, 90.0),
         ("a40", "cifar100", "shufflenetv2", 1024, "adadelta", 200, 8.0, 150.0),
         ("v100", "cifar100", "shufflenetv2", 512, "adadelta", 100, 5.0, 80.0)],  # other batch size
        "gpu string, dataset string, network string, batch_size int, optimizer string, "
        "power_limit int, time_per_epoch double, average_power double")
    got = time_energy_to_accuracy(train, power)
    expected = spark.createDataFrame(
        [("a40", "cifar100", "shufflenetv2", 1024, "adadelta", 0.1, 1, 0.5, 100, 3.0, 10.0, 90.0, 30.0, 2700.0, 900.0),
         ("a40", "cifar100", "shufflenetv2", 1024, "adadelta", 0.1, 1, 0.5, 200, 3.0, 8.0, 150.0, 24.0, 3600.0, 1200.0),
         ("a40", "cifar100", "shufflenetv2", 1024, "adadelta", 0.1, 1, 0.9, 100, None, 10.0, 90.0, None, None, 900.0),
         ("a40", "cifar100", "shufflenetv2", 1024, "adadelta", 0.1, 1, 0.9, 200, None, 8.0, 150.0, None, None, 1200.0)],
        "gpu string, dataset string, network string, batch_size int, optimizer string, learning_rate double, "
        "run int, target_metric double, power_limit int, target_epoch double, time_per_epoch double, "
        "average_power double, time_to_accuracy_s double, energy_to_accuracy_j double, energy_per_epoch_j double")
    assert_same_rows(got, expected)
